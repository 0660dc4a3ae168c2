"""How many rows each namespace's tables have taken: a search on a ClickHouse server asks for its namespaces' counts
in one statement, and reads what other processes wrote only once a count moved (LOOM_CHANGE_MARKER=engine:
retrieval/store/change_marker.py). Before, every search asked the engine what changed in two statements (the vector
rows since its last read, the side tables and the configuration): 12-13 ms of a 17 ms search at 100k rows on this
box, most of it the engine's cost of a statement over a namespace's rows.

Views count, so no write path has to: every insert into a table whose rows a process keeps copies of (the vector
rows, the side tables, the configurations) adds its row count here, retirements and copies by INSERT ... SELECT too.
SummingMergeTree: merges add the counts up, and a reader sums whatever parts there are, so a count only grows and
a write is in it once its insert returns. ORDER BY the tenant: a search reads one key's few rows (and, on a
cluster, the shard that holds the namespace's rows, where its views fire). No TTL: a count is a few bytes a
namespace.
"""

# The tables whose changes a search learns of before reading its in-process copies of them.
_COUNTED = ("memory_embeddings", "session_summaries", "entity_summaries", "memory_records", "namespaces")

STATEMENTS = [
    """
    CREATE TABLE IF NOT EXISTS namespace_writes (
        org String,
        namespace String,
        writes UInt64 COMMENT 'rows inserted into the counted tables, summed'
    ) ENGINE = SummingMergeTree
    ORDER BY (org, namespace)
    """,
    *(
        f"""
        CREATE MATERIALIZED VIEW IF NOT EXISTS namespace_writes_from_{table} TO namespace_writes AS
        SELECT org, namespace, count() AS writes FROM {table} GROUP BY org, namespace
        """
        for table in _COUNTED
    ),
]
