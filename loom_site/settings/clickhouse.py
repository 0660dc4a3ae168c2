"""ClickHouse: where the data lives, and how long a statement may take."""

from loom_site import env
from loom_site.settings.site import VAR_DIR

# --- ClickHouse -------------------------------------------------------------
# Embedded chDB in LOOM_DATA_DIR unless LOOM_CLICKHOUSE_URL names a server.
LOOM_DATA_DIR = env.string(
    "LOOM_DATA_DIR",
    str(VAR_DIR / "clickhouse"),
    doc="the embedded engine's data directory",
    shown="`$LOOM_VAR_DIR/clickhouse`",
)
LOOM_CLICKHOUSE_URL = env.string(
    "LOOM_CLICKHOUSE_URL",
    doc="a ClickHouse server (`http://user:pass@host:8123`) instead of the embedded engine",
)
# Within a request, each statement waits at most this long (an insert the second), and all of a request's statements
# together the third: a frozen engine gets a 503 within seconds, not a thread held statement after statement.
LOOM_CLICKHOUSE_QUERY_TIMEOUT_S = env.number(
    "LOOM_CLICKHOUSE_QUERY_TIMEOUT_S",
    5.0,
    minimum=0.1,
    doc="within a request, the longest a statement waits (the HTTP read, and `max_execution_time`)",
)
LOOM_CLICKHOUSE_WRITE_TIMEOUT_S = env.number(
    "LOOM_CLICKHOUSE_WRITE_TIMEOUT_S", 10.0, minimum=0.1, doc="the same for an insert"
)
LOOM_CLICKHOUSE_REQUEST_BUDGET_S = env.number(
    "LOOM_CLICKHOUSE_REQUEST_BUDGET_S",
    10.0,
    minimum=0.1,
    doc="all of a request's statements together: a frozen engine gets a 503 `CLICKHOUSE_UNAVAILABLE` within it (tests/test_clickhouse_faults.py); background work (a mirror's load, the commands) waits up to 60 s a statement",
)
LOOM_CLICKHOUSE_DATABASE = env.string("LOOM_CLICKHOUSE_DATABASE", "loom", doc="the database the tables live in")
# A cluster of LOOM_CLICKHOUSE_URL's remote_servers: tables sharded by (org, namespace) (retrieval/store/cluster.py).
# Its DDL goes ON CLUSTER (Keeper, replicated tables) unless every node's URL is listed in ..._NODES.
LOOM_CLICKHOUSE_CLUSTER = env.string(
    "LOOM_CLICKHOUSE_CLUSTER",
    doc="a cluster of the server's `remote_servers`: tables sharded by (org, namespace) ([Storage](#storage))",
)
LOOM_CLICKHOUSE_CLUSTER_NODES = env.strings(
    "LOOM_CLICKHOUSE_CLUSTER_NODES",
    doc="comma-separated URLs of every node: migrations run node by node, no `ON CLUSTER` (no Keeper)",
)
env.check_cluster(LOOM_CLICKHOUSE_CLUSTER, LOOM_CLICKHOUSE_URL, LOOM_CLICKHOUSE_CLUSTER_NODES)
