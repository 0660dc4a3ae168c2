"""memory.ask, search and its gates (the knobs), the in-process index, the workers, rerankers."""

from loom_site import env
from retrieval import knobs

# --- memory.ask --------------------------------------------------------------
# The model that writes its answers (unset: the process's LLM, LOOM_LLM_MODEL).
LOOM_MEMORY_ASK_SYNTH_MODEL = env.string(
    "LOOM_MEMORY_ASK_SYNTH_MODEL",
    doc="the model that writes `memory.ask`'s answers (same provider rules as `LOOM_LLM_MODEL`; unset: that one)",
)
# Cheaper tiers for easier asks (retrieval/search/ask.py `tier`); unset, a tier's asks go to the next one up.
LOOM_MEMORY_ASK_SYNTH_MODEL_CHEAP = env.string(
    "LOOM_MEMORY_ASK_SYNTH_MODEL_CHEAP",
    doc="cheaper models for easier asks (see memory.ask); unset, a tier's asks go to the next one up",
)
LOOM_MEMORY_ASK_MID_MODEL = env.string("LOOM_MEMORY_ASK_MID_MODEL", doc=env.ABOVE)
# The response cache for its answers: on by default; off by default plus a list of namespaces where it is on.
LOOM_MEMORY_ASK_LLM_CACHE_DEFAULT = env.boolean(
    "LOOM_MEMORY_ASK_LLM_CACHE_DEFAULT",
    True,
    doc="`memory.ask`'s answers in the response cache: on for every namespace, or (default off) for those listed",
)
LOOM_MEMORY_ASK_LLM_CACHE_NAMESPACES = env.strings("LOOM_MEMORY_ASK_LLM_CACHE_NAMESPACES", doc=env.ABOVE, shown="empty")
# Rows of source_class external (outside text, unattested) are shown as hits but never built on.
LOOM_MEMORY_ASK_EXCLUDE_UNVERIFIED_EXTERNAL = env.boolean(
    "LOOM_MEMORY_ASK_EXCLUDE_UNVERIFIED_EXTERNAL",
    True,
    doc="`memory.ask` builds no answer on unattested `external` rows (they still show as hits)",
)

# --- Search ------------------------------------------------------------------
# Search and its gates: every ranking knob, its default, bounds and why, is in retrieval/knobs.py (the
# docs/operating.md's table is generated from it).
globals().update({knob.name: knob.read(env) for knob in knobs.SETTINGS})
# The write gates judge every memory.set (off: values are stored unjudged, `write_gates: "off"`).
LOOM_WRITE_GATES = env.boolean(
    "LOOM_WRITE_GATES",
    True,
    doc='judge every `memory.set` for duplicates and conflicts (`false`: store unjudged, `write_gates: "off"`)',
)
# The write gates scan (new rows x stored rows) pairs in ClickHouse when no vector mirror serves the namespace;
# a batch over this many pairs reads the namespace's stored cells instead (retrieval/index/stored_cells.py).
LOOM_WRITE_GATES_MAX_PAIRS = env.integer(
    "LOOM_WRITE_GATES_MAX_PAIRS",
    1_000_000,
    minimum=0,
    doc='without a vector mirror, a batch whose (new × stored) pairs exceed this reads the namespace\'s cells stored in ClickHouse instead of scanning; the first such batch begins their training in the background, and it and those until they are ready wait for a loading mirror, else for the training (`LOOM_WRITE_GATES_LOAD_WAIT_S`), else are stored unjudged (`write_gates: "skipped"`)',
)
# A write batch too large to scan in ClickHouse (over LOOM_WRITE_GATES_MAX_PAIRS) that finds its namespace's mirror
# loading (the first write or search after a start begins the load), or else its stored cells training, waits this
# long for them rather than go unjudged, unless the pace so far says they will not be in by then
# (index.awaited, stored_cells.awaited).
LOOM_WRITE_GATES_LOAD_WAIT_S = env.number(
    "LOOM_WRITE_GATES_LOAD_WAIT_S",
    10.0,
    minimum=0,
    doc="a write batch over `LOOM_WRITE_GATES_MAX_PAIRS` whose namespace has no stored cells ready yet waits up to this many seconds, all told, for its vector mirror loading, else for the stored cells' training under way (the batch's own, or another process's; not at all once the pace of either says it will be later: a million rows load in ~56 s and train in ~45 s here, a few thousand in well under a second; nor, once a batch here waited in vain for another process's training that did not move for half this long or more, until it moves: a dead process's claim gives way only after 10 min), else is stored unjudged (`write_gates: \"skipped\"`); 0: never waits",
)
# Adaptive thresholds: derive the gates from the live embedder's probe (fakes keep the scalars).
LOOM_ADAPTIVE_THRESHOLDS = env.boolean(
    "LOOM_ADAPTIVE_THRESHOLDS",
    True,
    doc="derive the gates from the live embedder (fakes keep the scalars)",
)
# The recalibration worker (retrieval/gates/recalibration.py): the embedder probed again weekly, in the server process.
LOOM_RECALIBRATION_ENABLED = env.boolean(
    "LOOM_RECALIBRATION_ENABLED",
    True,
    doc="the server process of the embedded engine probes the live embedder again each interval and publishes its gates (a move of 0.05 or more is logged), then each namespace's kept calibration pairs, so the gates follow a model revised behind the same name; on a ClickHouse server run `manage.py recalibrate` on a schedule",
)
LOOM_RECALIBRATION_INTERVAL_SECONDS = env.number(
    "LOOM_RECALIBRATION_INTERVAL_SECONDS", 7 * 24 * 3600.0, minimum=0.01, doc=env.ABOVE, shown="604800 (a week)"
)
LOOM_EVAL_SCHEDULE = env.choice(
    "LOOM_EVAL_SCHEDULE",
    "off",
    ("off", "hourly", "daily"),
    doc="re-run each namespace's evaluated question sets on this schedule (the latest version, under the configurations of the set's latest run), so a drop shows in health `problems` and the Lab; the embedded engine's server process runs them, a deployment on a ClickHouse server runs `manage.py loom_eval scheduled` from cron",
)
LOOM_SEARCH_TRACE_LOG_ENABLED = env.boolean(
    "LOOM_SEARCH_TRACE_LOG_ENABLED",
    False,
    doc="a row per search in `search_trace_log`, kept 180 days (the query text only where the namespace consents); "
    "`make run` turns it on",
)
# The embedded engine's in-process copy of each namespace's live vectors (retrieval/index/).
LOOM_VECTOR_MIRROR = env.boolean(
    "LOOM_VECTOR_MIRROR",
    True,
    doc="score unfiltered searches (and judge writes) from an in-process copy of each namespace's live vectors; on a ClickHouse server a search first reads the rows other processes wrote since its last read, once the namespace's stamp moved (`LOOM_CHANGE_MARKER`)",
)
# How a search on a ClickHouse server learns that another process wrote (retrieval/store/change_marker.py).
LOOM_CHANGE_MARKER = env.choice(
    "LOOM_CHANGE_MARKER",
    "engine",
    ("engine", "host"),
    doc="on a ClickHouse server, how a search learns of other processes' writes before it reads its in-process copies (vectors, side tables, configuration): `engine` asks ClickHouse for its namespaces' write counts (one small statement) and reads what changed only once a count moved, wherever the writers run; `host` asks only when a write on this host stamped the namespace in `$LOOM_VAR_DIR/changes` since (no statement): right only when every process writing to the database runs on this host with this LOOM_VAR_DIR",
)
LOOM_CHANGE_MARKER_MAX_AGE_S = env.number(
    "LOOM_CHANGE_MARKER_MAX_AGE_S",
    5.0,
    minimum=0,
    doc="a search asks the engine what changed anyway once its last answer is this old: with `host`, how late a write from elsewhere (another host, SQL by hand) can be; with `engine`, a net for a change no count sees (a mutation run by hand)",
)
# The embedding worker inside the server process: auto = with the embedded engine (nothing else may open its data).
LOOM_EMBEDDING_WORKER = env.choice(
    "LOOM_EMBEDDING_WORKER",
    "auto",
    ("auto", "on", "off"),
    doc="the server process embeds stubs itself (`auto`: on the embedded engine only; `on`, `off`)",
)
LOOM_EMBEDDING_WORKER_INTERVAL_S = env.number("LOOM_EMBEDDING_WORKER_INTERVAL_S", 60.0, minimum=0.01, doc=env.ABOVE)
# ...which also sweeps what failed writes left behind (retrieval/ingest/repair.py) this often, leaving rows younger
# than the grace: they may belong to a write still storing them.
LOOM_REPAIR_INTERVAL_S = env.number(
    "LOOM_REPAIR_INTERVAL_S",
    3600.0,
    minimum=0.01,
    doc="that worker also sweeps what failed writes left behind (`loom_repair`), rows older than the grace",
)
LOOM_REPAIR_GRACE_S = env.number("LOOM_REPAIR_GRACE_S", 600.0, minimum=0, doc=env.ABOVE)
# All mirrors together, in bytes of vectors: past it the least recently searched are dropped (4 GiB); a namespace
# alone past it keeps a compact mirror (int8 codes) for its write gates, or none.
LOOM_VECTOR_MIRROR_MAX_BYTES = env.integer(
    "LOOM_VECTOR_MIRROR_MAX_BYTES",
    4 << 30,
    minimum=0,
    doc="all mirrors together; past it the least recently searched namespaces' mirrors are dropped (ClickHouse answers them until a search loads them again), and a namespace alone past it keeps a compact mirror for its write gates (each row's value vector as two int8 codes, ~3 bytes a dimension; its searches scan ClickHouse), and none past that too (a write batch over `LOOM_WRITE_GATES_MAX_PAIRS` then reads the namespace's cells stored in ClickHouse). A row weighs ~6 bytes a dimension, 10 once a search of the namespace used the key axis (its key vectors are held then, where they fit), and keeps ~1.7 KB of Python objects outside the budget (its name, rank columns, shown value); a namespace's first search (or the process's start: `LOOM_VECTOR_MIRROR_WARM`) starts its load in the background: 10-12 s at 200k rows here; its vectors serve searches and the write gates once they are in (56.4 s at 1M rows), its lexical legs once its words are counted after them",
    shown="4294967296 (4 GiB)",
)
# gunicorn's workers (`make run`) keep their Python threads on one CPU each and let the engine, the local model and
# long scans use every CPU (retrieval/cores.py): eight request threads trading Python's lock across cores cost a
# search ~40% more CPU.
LOOM_PIN_PYTHON_THREADS = env.boolean(
    "LOOM_PIN_PYTHON_THREADS",
    True,
    doc="each gunicorn worker runs its Python threads on one CPU (the workers take the CPUs in turn), and its native work (the embedded engine's statements, the local model, scans of 16k rows or more) on every CPU: with 8 threads a search request took 6.6-6.8 ms of CPU instead of 7.9-8.3, and 171.8-216.6 searches/s were served instead of 122.0-174.5 (docs/operating.md); false: the threads run wherever the OS puts them",
)
# A serving process's start loads the mirrors of the namespaces written most recently (index.warm): a restart
# otherwise left each to load on its first search or large write, which waited for it or scanned ClickHouse meanwhile.
LOOM_VECTOR_MIRROR_WARM = env.integer(
    "LOOM_VECTOR_MIRROR_WARM",
    100,
    minimum=0,
    doc="at its start a serving process loads, one after another and smallest first, the mirrors of the namespaces written most recently, up to this many, as many as fit `LOOM_VECTOR_MIRROR_MAX_BYTES` together: their first searches and write batches after a restart find them in instead of loading them (each such search reads ClickHouse meanwhile, each large batch waits up to `LOOM_WRITE_GATES_LOAD_WAIT_S`); 0: none until asked for",
)

# --- Rerankers (retrieval/search/rerank.py) ------------------------------------------
COHERE_API_KEY = env.string("COHERE_API_KEY", doc="`builtin:cohere`")
LOOM_COHERE_BASE_URL = env.string("LOOM_COHERE_BASE_URL", "https://api.cohere.com", doc=env.ABOVE)
# Operators' endpoints speaking Cohere's rerank protocol, by name: {"name": {"url", "model", "api_key_env"}}.
LOOM_RERANK_ENDPOINTS_JSON = env.string(
    "LOOM_RERANK_ENDPOINTS_JSON",
    doc="named rerank endpoints (checked at boot: an http(s) `url`, optional `model`, `api_key_env`)",
)
env.check_rerank_endpoints(LOOM_RERANK_ENDPOINTS_JSON)
LOOM_RERANK_OPENAI_MODEL = env.string(
    "LOOM_RERANK_OPENAI_MODEL", "gpt-6-luna", doc="`builtin:openai`'s model unless named"
)
LOOM_RERANK_MAX_DOCUMENTS = env.integer(
    "LOOM_RERANK_MAX_DOCUMENTS",
    100,
    minimum=2,
    maximum=1000,
    doc="rows sent, the wait per attempt, attempts on 429/5xx and transport errors",
)
LOOM_RERANK_TIMEOUT_S = env.number("LOOM_RERANK_TIMEOUT_S", 2.0, minimum=0.1, doc=env.ABOVE)
LOOM_RERANK_RETRY_ATTEMPTS = env.integer("LOOM_RERANK_RETRY_ATTEMPTS", 2, minimum=1, maximum=5, doc=env.ABOVE)
LOOM_RERANK_LLM_TIMEOUT_S = env.number(
    "LOOM_RERANK_LLM_TIMEOUT_S",
    15.0,
    minimum=0.1,
    doc="how long a search waits for `builtin:openai`'s order before it goes on with the fused one",
)
