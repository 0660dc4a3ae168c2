"""Django settings for Loom Recall.

Every deployment setting is read here, once, from the environment (strictly:
see loom_site/env.py). docs/operating.md lists them all.
"""

import json
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
import plotly

from loom_site import env
from retrieval import knobs

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(
    env.string(
        "LOOM_VAR_DIR",
        str(BASE_DIR / "var"),
        doc="local state: SQLite, the embedded engine's data, the secret key, demo credentials",
        shown="`./var`",
    )
)
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """LOOM_SECRET_KEY, else one generated once and kept in var/ (dev installs)."""
    configured = env.string("LOOM_SECRET_KEY", doc="set it in production", shown="generated once into `var/secret_key`")
    if configured:
        return configured
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env.boolean("LOOM_DEBUG", False, doc="Django's debug pages; never in production")
ALLOWED_HOSTS = env.strings(
    "LOOM_ALLOWED_HOSTS",
    ("127.0.0.1", "localhost", "[::1]"),
    doc="comma-separated",
)
CSRF_TRUSTED_ORIGINS = env.strings(
    "LOOM_CSRF_TRUSTED_ORIGINS", doc="comma-separated, for the dashboard behind a proxy", shown="empty"
)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tenancy",
    "retrieval",
    "memories",
    "recall",
    "mcp_server",
    "django_htmx",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "loom_site.middleware.request_context",
    "loom_site.middleware.lab_security_headers",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "loom_site.urls"
WSGI_APPLICATION = "loom_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Django's own tables (users, sessions, orgs, tokens). Memory data never goes here.
DATABASES = {
    "default": dj_database_url.parse(
        env.string(
            "DATABASE_URL",
            f"sqlite:///{VAR_DIR / 'loom.sqlite3'}",
            doc="Django's database",
            shown="SQLite in `LOOM_VAR_DIR`",
        ),
        conn_max_age=60,
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "recall:login"
# Dashboard logins (django-axes): after LOOM_LOGIN_FAILURE_LIMIT failed attempts for one username from one address,
# that pair is refused (429) for LOOM_LOGIN_COOLOFF_MINUTES; a success clears its count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.integer(
    "LOOM_LOGIN_FAILURE_LIMIT",
    5,
    minimum=1,
    doc="failed Lab logins for one username from one address before that pair is locked out (django-axes; 429)",
)
AXES_COOLOFF_TIME = timedelta(
    minutes=env.number(
        "LOOM_LOGIN_COOLOFF_MINUTES",
        15.0,
        minimum=0.1,
        doc="how long a lockout lasts (`manage.py axes_reset_username USERNAME` ends one)",
    )
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "recall/locked.html"
# Behind HTTPS, the session and CSRF cookies travel only over it (off by default: `make run` serves plain HTTP on
# loopback, where a Secure cookie would never come back).
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.boolean(
    "LOOM_SECURE_COOKIES", False, doc="behind HTTPS: the session and CSRF cookies travel only over it"
)
CSRF_COOKIE_HTTPONLY = True  # the Lab sends its CSRF token from the page (hx-headers), never from script
LOGIN_REDIRECT_URL = "recall:lab"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
# plotly.js comes with the plotly package (requirements.txt); htmx is vendored under recall/static.
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(plotly.__file__).parent / "package_data")]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# Serve straight from the app's static folders: no collectstatic step, no CDN.
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["tenancy.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [],
    "EXCEPTION_HANDLER": "memories.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Loom Recall API",
    "DESCRIPTION": "Memory retrieval for AI agents: POST /v1/<op> with a Bearer token.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "OAS_VERSION": "3.1.0",
    "SORT_OPERATIONS": False,  # as memories/urls.py lists the ops
    "ENUM_NAME_OVERRIDES": {"ErrorCode": "retrieval.errors.STATUS"},  # its codes; a client branches on them
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"outage_logged": {"()": "retrieval.store.clickhouse.OutageLogged"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["outage_logged"]}},
    "root": {"handlers": ["console"], "level": env.string("LOOM_LOG_LEVEL", "INFO", doc="the root logger's level")},
    # The providers' HTTP client logs a line per request at INFO; our senders log what goes wrong. The ClickHouse
    # driver (and urllib3 under it) logs a warning per failed request; the service logs an outage once as it begins
    # and once as it ends, and no line that only repeats it (`outage_logged`).
    "loggers": {
        **{name: {"level": "WARNING"} for name in ("httpx", "httpx2")},
        **{name: {"level": "ERROR"} for name in ("urllib3.connectionpool", "clickhouse_connect.driver")},
        "axes": {"level": "WARNING"},  # a line per login attempt at INFO
    },
}

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
