"""The service's Prometheus metrics (served at /metrics when LOOM_METRICS_TOKEN is set).

One registry per process: with several workers each answers for itself, so a scrape through a load balancer sees
one worker; scrape each worker's port, or sum what they report.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

requests = Counter("loom_requests", "API requests answered, by op and HTTP status", ["op", "status"], registry=REGISTRY)
request_seconds = Histogram(
    "loom_request_seconds",
    "API request latency, by op",
    ["op"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
statement_seconds = Histogram(
    "loom_clickhouse_statement_seconds",
    "ClickHouse statement time, by kind (query, insert, command)",
    ["kind"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
    registry=REGISTRY,
)
outages = Counter("loom_clickhouse_outages", "ClickHouse outages begun (one per state change)", registry=REGISTRY)
provider_calls = Counter(
    "loom_provider_calls",
    "Model provider calls, by provider and outcome (ok, failed)",
    ["provider", "outcome"],
    registry=REGISTRY,
)
cache_lookups = Counter(
    "loom_cache_lookups",
    "Cache lookups, by cache (embedding, llm) and result (hit, miss)",
    ["cache", "result"],
    registry=REGISTRY,
)
swept = Counter("loom_repair_swept", "Row versions loom_repair retired (failed writes' leftovers)", registry=REGISTRY)
write_gates = Counter(
    "loom_write_gates",
    "Rows the write gates judged, skipped (stored unjudged) or were off for",
    ["outcome"],
    registry=REGISTRY,
)
mirror_bytes = Gauge("loom_vector_mirror_bytes", "Bytes the vector mirrors hold in this process", registry=REGISTRY)
mirror_loading = Gauge(
    "loom_vector_mirror_loading",
    "Namespaces whose vector mirror this process is loading (its vectors, or its words): a start's warm-up too",
    registry=REGISTRY,
)
