"""Model providers: embedders, LLMs, the inference gateway, the per-org model-call switch."""

import json

from loom_site import env

# --- Providers ---------------------------------------------------------------
LOOM_EMBEDDING_MODEL = env.string(
    "LOOM_EMBEDDING_MODEL",
    "fake-ngram-384",
    doc="`fake-ngram-<dim>` (hashed character trigrams: deterministic, offline, knows spelling not meaning), `local` / `local:minilm` (all-MiniLM-L6-v2, 384-d, CPU ONNX from installed files; ~1 s to load), `text-embedding-3-small` / `-large` (OpenAI; without `OPENAI_API_KEY` the fake serves and health says `embedder_key_missing`), `gemini-embedding-001` (Gemini, the same without its key); other names are refused at boot",
    shown="`fake-ngram-384` (`local` under `make run`)",
)
LOOM_EMBEDDING_PROVIDER = env.choice(
    "LOOM_EMBEDDING_PROVIDER",
    "",
    ("", "fake", "local", "openai", "gemini"),
    doc="`fake`, `local`, `openai`, `gemini`",
    shown="inferred from the model",
)
LOOM_LOCAL_MODEL_DIR = env.string(
    "LOOM_LOCAL_MODEL_DIR",
    doc="another fastembed model directory (model.onnx, tokenizer.json, tokenizer_config.json) for `local`",
)
# The width OpenAI and Gemini are asked for; local models emit their native width.
LOOM_EMBEDDING_DIM = env.integer(
    "LOOM_EMBEDDING_DIM",
    3072,
    minimum=8,
    maximum=4096,
    doc="the width OpenAI is asked for (`dimensions`)",
)
OPENAI_API_KEY = env.string("OPENAI_API_KEY", doc="the OpenAI embedder's key, and a base URL (a gateway, a proxy)")
OPENAI_BASE_URL = env.string("OPENAI_BASE_URL", doc=env.ABOVE)
GEMINI_API_KEY = env.string(
    "GEMINI_API_KEY",
    doc="the Gemini embedder (`gemini-embedding-001`, asked for `LOOM_EMBEDDING_DIM`)",
)
GOOGLE_API_KEY = env.string("GOOGLE_API_KEY", doc=env.ABOVE)
LOOM_GEMINI_BASE_URL = env.string(
    "LOOM_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com", doc=env.ABOVE, shown="Google's"
)
LOOM_EMBEDDING_RETRY_ATTEMPTS = env.integer(
    "LOOM_EMBEDDING_RETRY_ATTEMPTS",
    3,
    minimum=1,
    maximum=10,
    doc="attempts on transport errors and 408/409/425/429/500/502/503/504, backing off 0.5 s × 2ⁿ up to the cap; nothing else is retried",
)
LOOM_EMBEDDING_RETRY_MAX_WAIT_S = env.number("LOOM_EMBEDDING_RETRY_MAX_WAIT_S", 10.0, minimum=0, doc=env.ABOVE)
LOOM_HTTP_CLIENT_TIMEOUT_S = env.number("LOOM_HTTP_CLIENT_TIMEOUT_S", 20.0, minimum=0.1, doc="provider calls")
LOOM_HTTP_CLIENT_CONNECT_TIMEOUT_S = env.number("LOOM_HTTP_CLIENT_CONNECT_TIMEOUT_S", 5.0, minimum=0.1, doc=env.ABOVE)
# Query embeddings: the process's LRU (entries, seconds) and the shared table (texts up to this long).
LOOM_EMBEDDING_CACHE_SIZE = env.integer(
    "LOOM_EMBEDDING_CACHE_SIZE",
    4096,
    minimum=0,
    doc="the per-process LRU of query vectors (keyed by org, model and normalised text)",
)
LOOM_EMBEDDING_CACHE_TTL_S = env.number("LOOM_EMBEDDING_CACHE_TTL_S", 3600.0, minimum=0, doc=env.ABOVE)
LOOM_REQUIRE_REAL_PROVIDERS = env.boolean(
    "LOOM_REQUIRE_REAL_PROVIDERS", False, doc="health reads `degraded` while a fake provider serves"
)
# LLM clients: LOOM_LLM_PROVIDER wins; else inferred from LOOM_LLM_MODEL; else from the key present; else the fake.
LOOM_LLM_PROVIDER = env.choice(
    "LOOM_LLM_PROVIDER",
    "",
    ("", "fake", "openai", "anthropic"),
    doc="`openai` (`gpt*`, `o1*`, `o3*`, `o4*`, `chatgpt*`), `anthropic` (`claude*`) or `fake` (`fake-echo-1`, a deterministic echo); unset: `gpt-6-luna` with `OPENAI_API_KEY`, else `claude-haiku-4-5` with `ANTHROPIC_API_KEY`, else the fake. A model whose key is missing is served by the fake (`llm_key_missing` in health). The provider chosen is logged once, with where it came from. What a model takes is learned from its 400 answers, once per process: a field it refuses is left out from then on, a reasoning effort it refuses settles on the lowest it lists, and the output limit it names clamps every later cap",
    shown="inferred",
)
LOOM_LLM_MODEL = env.string("LOOM_LLM_MODEL", doc=env.ABOVE, shown="then the fake")
LOOM_LLM_FALLBACK_MODEL = env.string(
    "LOOM_LLM_FALLBACK_MODEL",
    doc="answers when the model has an outage or rejects a request (400/413/422); 401/403/404 propagate; never cached",
)
LOOM_LLM_RETRY_ATTEMPTS = env.integer(
    "LOOM_LLM_RETRY_ATTEMPTS",
    4,
    minimum=1,
    maximum=10,
    doc="retries on transport errors and 429/500/502/503/504/529",
)
LOOM_LLM_RETRY_MAX_WAIT_S = env.number("LOOM_LLM_RETRY_MAX_WAIT_S", 20.0, minimum=0, doc=env.ABOVE)
LOOM_LLM_REQUEST_TIMEOUT_S = env.number("LOOM_LLM_REQUEST_TIMEOUT_S", 300.0, minimum=1, doc=env.ABOVE)
# OpenAI: the reasoning effort every call asks for (unset: the lowest the model takes, learned from its 400s).
LOOM_LLM_OPENAI_REASONING_EFFORT = env.choice(
    "LOOM_LLM_OPENAI_REASONING_EFFORT",
    "",
    ("", "none", "minimal", "low", "medium", "high", "xhigh"),
    doc="the `reasoning_effort` OpenAI calls send; unset: the lowest the model takes (`none` first; a 400 listing "
    "the values it supports settles on the lowest of them; a model that takes none is sent none)",
    shown="the lowest the model takes",
)
# The most output tokens reserved for a model's hidden reasoning, on top of a caller's cap.
LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX = env.integer(
    "LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX",
    8192,
    minimum=0,
    doc="hidden reasoning counts against a reply's cap: the reasoning tokens a model reports become its reserve (twice the most seen, at most this), added to every cap; a reply that hit the cap with no text is sent again once with this reserve",
)
# Claude, through the optional anthropic SDK (requirements-anthropic.txt); ANTHROPIC_BASE_URL honoured.
ANTHROPIC_API_KEY = env.string(
    "ANTHROPIC_API_KEY",
    doc="Claude through the `anthropic` SDK, an optional extra (`.venv/bin/pip install -r requirements-anthropic.txt`; `make test` installs it). It has no JSON mode: asked for JSON, the system prompt gets a directive and a code fence comes off the answer; the system block is marked cacheable; the effort goes as `output_config.effort`",
)
ANTHROPIC_BASE_URL = env.string("ANTHROPIC_BASE_URL", doc=env.ABOVE)
LOOM_LLM_ANTHROPIC_EFFORT = env.string("LOOM_LLM_ANTHROPIC_EFFORT", doc=env.ABOVE)
# Headers naming a model call's customer, only toward the gateway hosts listed.
LOOM_INFERENCE_CUSTOMER_HEADER = env.string(
    "LOOM_INFERENCE_CUSTOMER_HEADER",
    doc="headers naming a model call's org and feature (`memory.set`, `memory.search`, `hyde`, `embed_pending`, `reembed`, …); the deployment's own calls (the calibration probe) name the system customer",
)
LOOM_INFERENCE_FEATURE_HEADER = env.string("LOOM_INFERENCE_FEATURE_HEADER", doc=env.ABOVE)
LOOM_INFERENCE_CUSTOMER_FORMAT = env.string("LOOM_INFERENCE_CUSTOMER_FORMAT", "{org}", doc=env.ABOVE)
LOOM_INFERENCE_SYSTEM_CUSTOMER = env.string("LOOM_INFERENCE_SYSTEM_CUSTOMER", "loom", doc=env.ABOVE)
# Loom's feature names (memory.search, hyde, embed_pending, ...) -> the gateway's; a name not listed goes as is.
LOOM_INFERENCE_FEATURE_MAP_JSON = env.string(
    "LOOM_INFERENCE_FEATURE_MAP_JSON",
    doc='`{"memory.ask": "loom-answers", …}`: Loom\'s feature names as the gateway knows them; a feature not listed goes as named',
)
# A cell serving several customers: it does not start unless every model call names its customer.
LOOM_INFERENCE_CUSTOMER_REQUIRED = env.boolean(
    "LOOM_INFERENCE_CUSTOMER_REQUIRED",
    False,
    doc="a cell serving several customers: the process does not start unless `LOOM_INFERENCE_CUSTOMER_HEADER` is set",
)
LOOM_INFERENCE_IDENTITY_HEADERS_JSON = env.string(
    "LOOM_INFERENCE_IDENTITY_HEADERS_JSON",
    doc='`{"X-Agent": "{agent}", "X-User": "{user_id}", …}` templates over `{org}`, `{namespace}`, `{subject}` (the token\'s), `{agent}` (of an agent\'s subject `sa:<trust>:<agent>`), `{email}` (a subject that is an address), `{user_id}` (the request\'s — a search\'s, a write batch\'s single one — else the subject) and `{tenant}` (always empty here: this build has no trusts). A header that renders empty is left out; the headers naming `{agent}` or `{tenant}` go together or not at all; a space, `%` or non-ASCII is percent-encoded. Needs `LOOM_INFERENCE_GATEWAY_HOSTS`',
)
LOOM_INFERENCE_GATEWAY_HOSTS = env.strings(
    "LOOM_INFERENCE_GATEWAY_HOSTS",
    doc="the only hosts those headers go to: the model client's request hook strips them from every other request, a redirect hop included",
    shown="empty",
)
# A gateway's answers that refuse one identity (or ask it to wait): matched exactly on status and code/type/message.
LOOM_INFERENCE_IDENTITY_REFUSALS_JSON = env.string(
    "LOOM_INFERENCE_IDENTITY_REFUSALS_JSON",
    json.dumps(
        {
            "refused": [
                {"status": 402, "code": "budget_exceeded"},
                {"status": 403, "code": "agent_denied"},
                {"status": 400, "code": "identity_incomplete"},
                {"status": 400, "code": "identity_malformed"},
            ],
            "wait": [{"status": 429, "code": "agent_request_limit"}],
        }
    ),
    doc="the gateway's answers that refuse an identity (`refused`) or ask it to wait (`wait`), matched exactly on "
    "status and code, type or message",
    shown="the reference gateway's",
)
# After the gateway refuses an identity, a background job's calls for it are held this long, nothing sent.
LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS = env.number(
    "LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS",
    60.0,
    minimum=0,
    doc='after the gateway refuses an identity, a background job\'s calls for it (same origin, path and model) are refused here with nothing sent for this long (after "wait": the `Retry-After`, at most 5 minutes); a request always asks, and a success ends the hold',
    shown="`60`",
)
env.check_refusals(LOOM_INFERENCE_IDENTITY_REFUSALS_JSON)
env.check_feature_map(LOOM_INFERENCE_FEATURE_MAP_JSON)
env.check_customer_required(LOOM_INFERENCE_CUSTOMER_REQUIRED, LOOM_INFERENCE_CUSTOMER_HEADER)
env.check_identity_headers(LOOM_INFERENCE_IDENTITY_HEADERS_JSON, LOOM_INFERENCE_GATEWAY_HOSTS)
# LLM-free reads: no search makes an LLM call (no HyDE), whatever its recipe or budget.
LOOM_READS_LLM_FREE = env.boolean(
    "LOOM_READS_LLM_FREE",
    False,
    doc="no search makes an LLM call (HyDE off), whatever its recipe or budget; `memory.ask` answers 409 unless `allow_synthesis: false`",
)
# The per-org model-call switch: how often a process re-reads it, and how long it trusts its copy.
LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS = env.number(
    "LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS",
    5.0,
    minimum=0,
    doc="the model-call switch: re-read interval, and how long a copy is trusted",
)
LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS = env.number(
    "LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS", 60.0, minimum=0, doc=env.ABOVE
)
