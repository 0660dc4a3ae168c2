"""Requests and the write path: sizes, rate limits, how values are embedded and extracted."""

from loom_site import env

# --- Requests and the write path --------------------------------------------
LOOM_REQUEST_MAX_BYTES = env.integer(
    "LOOM_REQUEST_MAX_BYTES",
    36 * 1024 * 1024,
    minimum=1024,
    doc="larger bodies get 413 `BODY_TOO_LARGE`",
    shown="37748736 (36 MiB)",
)
# Per-token rate limits (tenancy/limits.py): requests a minute (0: none) and the burst a token may spend at once,
# shared by the app processes of a host.
LOOM_RATE_LIMIT_PER_MINUTE = env.number(
    "LOOM_RATE_LIMIT_PER_MINUTE",
    60_000.0,
    minimum=0,
    doc="requests a minute per token (0: no limit); past it 429 `RATE_LIMITED` with `Retry-After`",
)
LOOM_RATE_LIMIT_BURST = env.number("LOOM_RATE_LIMIT_BURST", 1000.0, minimum=1, doc="requests a token may spend at once")
# GET /metrics (Prometheus) answers a scraper sending this as its Bearer token; unset, /metrics is off.
LOOM_METRICS_TOKEN = env.string(
    "LOOM_METRICS_TOKEN",
    doc="`GET /metrics` (Prometheus) answers a scraper sending it as its Bearer token; unset, `/metrics` is off (404)",
)
DATA_UPLOAD_MAX_MEMORY_SIZE = LOOM_REQUEST_MAX_BYTES
LOOM_MEMORY_VALUE_MAX_BYTES = env.integer(
    "LOOM_MEMORY_VALUE_MAX_BYTES", 64 * 1024, minimum=1, doc="larger values get 413 `VALUE_TOO_LARGE`"
)
# The first part of a value that is embedded on the row itself; the rest is
# reachable through chunks.
LOOM_MEMORY_EMBED_HEAD_CHARS = env.integer(
    "LOOM_MEMORY_EMBED_HEAD_CHARS",
    2000,
    minimum=64,
    doc="the part of a value embedded on its row; longer values are chunked",
)
LOOM_MEMORY_CHUNK_CHARS = env.integer("LOOM_MEMORY_CHUNK_CHARS", 1000, minimum=64, doc="chunk size")
# A row written without entities gets the names its value is about (retrieval/language/names.py `in_value`), so the
# entity, graph and related legs serve it; with a real model, the entity extractor then asks it
# (retrieval/ingest/entity_extractor.py).
LOOM_ENTITY_EXTRACT_ENABLED = env.boolean(
    "LOOM_ENTITY_EXTRACT_ENABLED",
    True,
    doc="a row written without `entities` gets the names its value is about, read deterministically at write time; "
    "where a real LLM is configured the entity extractor then asks it in the background (the extraction queue, "
    "task `entities`) and writes the entities and relations it names as the row's next version",
)
# memory.set_from_messages: the turns one extraction call reads (retrieval/ingest/extraction.py). Fewer calls with
# more; a model reads a long batch less closely.
LOOM_MEMORY_EXTRACT_BATCH_TURNS = env.integer(
    "LOOM_MEMORY_EXTRACT_BATCH_TURNS",
    40,
    minimum=1,
    doc="`memory.set_from_messages`: the turns one extraction call reads (a 200-message request: 5 calls)",
)
# The conflict resolver (retrieval/ingest/conflict_resolver.py): after a write whose row got a conflict verdict, a
# model judges the pair. Off where either model is the fake: an echo cannot judge.
LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED = env.boolean(
    "LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED",
    True,
    doc="after a write whose row got a `conflict_verdict`, a model judges the pair in the background: a revision "
    "supersedes the older row, a contradiction marks both, compatible clears the verdict; on unless the LLM or "
    "the resolver's model is the fake",
)
LOOM_CONFLICT_RESOLVER_MODEL = env.string(
    "LOOM_CONFLICT_RESOLVER_MODEL",
    "gpt-6.1-sol",
    doc="the conflict resolver's model (same provider rules as `LOOM_LLM_MODEL`; its key missing, the resolver is off)",
)
