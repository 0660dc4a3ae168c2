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
VAR_DIR = Path(env.string("LOOM_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """LOOM_SECRET_KEY, else one generated once and kept in var/ (dev installs)."""
    configured = env.string("LOOM_SECRET_KEY")
    if configured:
        return configured
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env.boolean("LOOM_DEBUG", False)
ALLOWED_HOSTS = env.strings("LOOM_ALLOWED_HOSTS", ("127.0.0.1", "localhost", "[::1]"))
CSRF_TRUSTED_ORIGINS = env.strings("LOOM_CSRF_TRUSTED_ORIGINS")

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
        env.string("DATABASE_URL", f"sqlite:///{VAR_DIR / 'loom.sqlite3'}"), conn_max_age=60
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
AXES_FAILURE_LIMIT = env.integer("LOOM_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env.number("LOOM_LOGIN_COOLOFF_MINUTES", 15.0, minimum=0.1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "recall/locked.html"
# Behind HTTPS, the session and CSRF cookies travel only over it (off by default: `make run` serves plain HTTP on
# loopback, where a Secure cookie would never come back).
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.boolean("LOOM_SECURE_COOKIES", False)
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
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.string("LOOM_LOG_LEVEL", "INFO")},
    # The providers' HTTP client logs a line per request at INFO; our senders log what goes wrong. The ClickHouse
    # driver (and urllib3 under it) logs a warning per failed request; the service logs an outage once as it begins
    # and once as it ends.
    "loggers": {
        **{name: {"level": "WARNING"} for name in ("httpx", "httpx2")},
        **{name: {"level": "ERROR"} for name in ("urllib3.connectionpool", "clickhouse_connect.driver")},
        "axes": {"level": "WARNING"},  # a line per login attempt at INFO
    },
}

# --- ClickHouse -------------------------------------------------------------
# Embedded chDB in LOOM_DATA_DIR unless LOOM_CLICKHOUSE_URL names a server.
LOOM_DATA_DIR = env.string("LOOM_DATA_DIR", str(VAR_DIR / "clickhouse"))
LOOM_CLICKHOUSE_URL = env.string("LOOM_CLICKHOUSE_URL")
# Within a request, each statement waits at most this long (an insert the second), and all of a request's statements
# together the third: a frozen engine gets a 503 within seconds, not a thread held statement after statement.
LOOM_CLICKHOUSE_QUERY_TIMEOUT_S = env.number("LOOM_CLICKHOUSE_QUERY_TIMEOUT_S", 5.0, minimum=0.1)
LOOM_CLICKHOUSE_WRITE_TIMEOUT_S = env.number("LOOM_CLICKHOUSE_WRITE_TIMEOUT_S", 10.0, minimum=0.1)
LOOM_CLICKHOUSE_REQUEST_BUDGET_S = env.number("LOOM_CLICKHOUSE_REQUEST_BUDGET_S", 10.0, minimum=0.1)
LOOM_CLICKHOUSE_DATABASE = env.string("LOOM_CLICKHOUSE_DATABASE", "loom")
# A cluster of LOOM_CLICKHOUSE_URL's remote_servers: tables sharded by (org, namespace) (retrieval/store/cluster.py).
# Its DDL goes ON CLUSTER (Keeper, replicated tables) unless every node's URL is listed in ..._NODES.
LOOM_CLICKHOUSE_CLUSTER = env.string("LOOM_CLICKHOUSE_CLUSTER")
LOOM_CLICKHOUSE_CLUSTER_NODES = env.strings("LOOM_CLICKHOUSE_CLUSTER_NODES")
env.check_cluster(LOOM_CLICKHOUSE_CLUSTER, LOOM_CLICKHOUSE_URL, LOOM_CLICKHOUSE_CLUSTER_NODES)

# --- Requests and the write path --------------------------------------------
LOOM_REQUEST_MAX_BYTES = env.integer("LOOM_REQUEST_MAX_BYTES", 36 * 1024 * 1024, minimum=1024)
# Per-token rate limits (tenancy/limits.py): requests a minute (0: none) and the burst a token may spend at once;
# each of LOOM_APP_PROCESSES app processes (make run sets it to WORKERS) allows its share.
LOOM_RATE_LIMIT_PER_MINUTE = env.number("LOOM_RATE_LIMIT_PER_MINUTE", 60_000.0, minimum=0)
LOOM_RATE_LIMIT_BURST = env.number("LOOM_RATE_LIMIT_BURST", 1000.0, minimum=1)
LOOM_APP_PROCESSES = env.integer("LOOM_APP_PROCESSES", 1, minimum=1)
# GET /metrics (Prometheus) answers a scraper sending this as its Bearer token; unset, /metrics is off.
LOOM_METRICS_TOKEN = env.string("LOOM_METRICS_TOKEN")
DATA_UPLOAD_MAX_MEMORY_SIZE = LOOM_REQUEST_MAX_BYTES
LOOM_MEMORY_VALUE_MAX_BYTES = env.integer("LOOM_MEMORY_VALUE_MAX_BYTES", 64 * 1024, minimum=1)
# The first part of a value that is embedded on the row itself; the rest is
# reachable through chunks.
LOOM_MEMORY_EMBED_HEAD_CHARS = env.integer("LOOM_MEMORY_EMBED_HEAD_CHARS", 2000, minimum=64)
LOOM_MEMORY_CHUNK_CHARS = env.integer("LOOM_MEMORY_CHUNK_CHARS", 1000, minimum=64)
LOOM_MEMORY_CHUNK_OVERLAP_CHARS = env.integer("LOOM_MEMORY_CHUNK_OVERLAP_CHARS", 150, minimum=0)

# --- Providers ---------------------------------------------------------------
LOOM_EMBEDDING_MODEL = env.string("LOOM_EMBEDDING_MODEL", "fake-ngram-384")
LOOM_EMBEDDING_PROVIDER = env.choice("LOOM_EMBEDDING_PROVIDER", "", ("", "fake", "local", "openai", "gemini"))
LOOM_LOCAL_MODEL_DIR = env.string("LOOM_LOCAL_MODEL_DIR")
# The width OpenAI and Gemini are asked for; local models emit their native width.
LOOM_EMBEDDING_DIM = env.integer("LOOM_EMBEDDING_DIM", 3072, minimum=8, maximum=4096)
OPENAI_API_KEY = env.string("OPENAI_API_KEY")
OPENAI_BASE_URL = env.string("OPENAI_BASE_URL")
GEMINI_API_KEY = env.string("GEMINI_API_KEY")
GOOGLE_API_KEY = env.string("GOOGLE_API_KEY")
LOOM_GEMINI_BASE_URL = env.string("LOOM_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com")
LOOM_EMBEDDING_RETRY_ATTEMPTS = env.integer("LOOM_EMBEDDING_RETRY_ATTEMPTS", 3, minimum=1, maximum=10)
LOOM_EMBEDDING_RETRY_MAX_WAIT_S = env.number("LOOM_EMBEDDING_RETRY_MAX_WAIT_S", 10.0, minimum=0)
LOOM_HTTP_CLIENT_TIMEOUT_S = env.number("LOOM_HTTP_CLIENT_TIMEOUT_S", 20.0, minimum=0.1)
LOOM_HTTP_CLIENT_CONNECT_TIMEOUT_S = env.number("LOOM_HTTP_CLIENT_CONNECT_TIMEOUT_S", 5.0, minimum=0.1)
# Query embeddings: the process's LRU (entries, seconds) and the shared table (texts up to this long).
LOOM_EMBEDDING_CACHE_SIZE = env.integer("LOOM_EMBEDDING_CACHE_SIZE", 4096, minimum=0)
LOOM_EMBEDDING_CACHE_TTL_S = env.number("LOOM_EMBEDDING_CACHE_TTL_S", 3600.0, minimum=0)
LOOM_EMBEDDING_CACHE_SHARED_MAX_CHARS = env.integer("LOOM_EMBEDDING_CACHE_SHARED_MAX_CHARS", 2000, minimum=0)
LOOM_REQUIRE_REAL_PROVIDERS = env.boolean("LOOM_REQUIRE_REAL_PROVIDERS", False)
# LLM clients: LOOM_LLM_PROVIDER wins; else inferred from LOOM_LLM_MODEL; else from the key present; else the fake.
LOOM_LLM_PROVIDER = env.choice("LOOM_LLM_PROVIDER", "", ("", "fake", "openai", "anthropic"))
LOOM_LLM_MODEL = env.string("LOOM_LLM_MODEL")
LOOM_LLM_FALLBACK_MODEL = env.string("LOOM_LLM_FALLBACK_MODEL")
LOOM_LLM_RETRY_ATTEMPTS = env.integer("LOOM_LLM_RETRY_ATTEMPTS", 4, minimum=1, maximum=10)
LOOM_LLM_RETRY_MAX_WAIT_S = env.number("LOOM_LLM_RETRY_MAX_WAIT_S", 20.0, minimum=0)
LOOM_LLM_REQUEST_TIMEOUT_S = env.number("LOOM_LLM_REQUEST_TIMEOUT_S", 300.0, minimum=1)
# The most output tokens reserved for a model's hidden reasoning, on top of a caller's cap.
LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX = env.integer("LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX", 8192, minimum=0)
# Claude, through the optional anthropic SDK (requirements-anthropic.txt); ANTHROPIC_BASE_URL honoured.
ANTHROPIC_API_KEY = env.string("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env.string("ANTHROPIC_BASE_URL")
LOOM_LLM_ANTHROPIC_EFFORT = env.string("LOOM_LLM_ANTHROPIC_EFFORT")
# Headers naming a model call's customer, only toward the gateway hosts listed.
LOOM_INFERENCE_CUSTOMER_HEADER = env.string("LOOM_INFERENCE_CUSTOMER_HEADER")
LOOM_INFERENCE_FEATURE_HEADER = env.string("LOOM_INFERENCE_FEATURE_HEADER")
LOOM_INFERENCE_CUSTOMER_FORMAT = env.string("LOOM_INFERENCE_CUSTOMER_FORMAT", "{org}")
# Loom's feature names (memory.search, hyde, embed_pending, ...) -> the gateway's; a name not listed goes as is.
LOOM_INFERENCE_FEATURE_MAP_JSON = env.string("LOOM_INFERENCE_FEATURE_MAP_JSON")
# A cell serving several customers: it does not start unless every model call names its customer.
LOOM_INFERENCE_CUSTOMER_REQUIRED = env.boolean("LOOM_INFERENCE_CUSTOMER_REQUIRED", False)
LOOM_INFERENCE_SYSTEM_CUSTOMER = env.string("LOOM_INFERENCE_SYSTEM_CUSTOMER", "loom")
LOOM_INFERENCE_IDENTITY_HEADERS_JSON = env.string("LOOM_INFERENCE_IDENTITY_HEADERS_JSON")
LOOM_INFERENCE_GATEWAY_HOSTS = env.strings("LOOM_INFERENCE_GATEWAY_HOSTS")
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
)
# After the gateway refuses an identity, a background job's calls for it are held this long, nothing sent.
LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS = env.number("LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS", 60.0, minimum=0)
env.check_refusals(LOOM_INFERENCE_IDENTITY_REFUSALS_JSON)
env.check_feature_map(LOOM_INFERENCE_FEATURE_MAP_JSON)
env.check_customer_required(LOOM_INFERENCE_CUSTOMER_REQUIRED, LOOM_INFERENCE_CUSTOMER_HEADER)
env.check_identity_headers(LOOM_INFERENCE_IDENTITY_HEADERS_JSON, LOOM_INFERENCE_GATEWAY_HOSTS)
# LLM-free reads: no search makes an LLM call (no HyDE), whatever its recipe or budget.
LOOM_READS_LLM_FREE = env.boolean("LOOM_READS_LLM_FREE", False)
# The per-org model-call switch: how often a process re-reads it, and how long it trusts its copy.
LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS = env.number("LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS", 5.0, minimum=0)
LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS = env.number("LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS", 60.0, minimum=0)

# --- memory.ask --------------------------------------------------------------
# The model that writes its answers (unset: the process's LLM, LOOM_LLM_MODEL).
LOOM_MEMORY_ASK_SYNTH_MODEL = env.string("LOOM_MEMORY_ASK_SYNTH_MODEL")
# Cheaper tiers for easier asks (retrieval/search/ask.py `tier`); unset, a tier's asks go to the next one up.
LOOM_MEMORY_ASK_SYNTH_MODEL_CHEAP = env.string("LOOM_MEMORY_ASK_SYNTH_MODEL_CHEAP")
LOOM_MEMORY_ASK_MID_MODEL = env.string("LOOM_MEMORY_ASK_MID_MODEL")
# The response cache for its answers: on by default; off by default plus a list of namespaces where it is on.
LOOM_MEMORY_ASK_LLM_CACHE_DEFAULT = env.boolean("LOOM_MEMORY_ASK_LLM_CACHE_DEFAULT", True)
LOOM_MEMORY_ASK_LLM_CACHE_NAMESPACES = env.strings("LOOM_MEMORY_ASK_LLM_CACHE_NAMESPACES")
# The weight of the used_cited event a cited key gets (memory.outcome's positive event weighs 1 by default).
LOOM_MEMORY_ASK_CITED_WEIGHT = env.number("LOOM_MEMORY_ASK_CITED_WEIGHT", 0.5, minimum=0, maximum=10)
# Rows of source_class external (outside text, unattested) are shown as hits but never built on.
LOOM_MEMORY_ASK_EXCLUDE_UNVERIFIED_EXTERNAL = env.boolean("LOOM_MEMORY_ASK_EXCLUDE_UNVERIFIED_EXTERNAL", True)

# --- Search ------------------------------------------------------------------
# Search and its gates: every ranking knob, its default, bounds and why, is in retrieval/knobs.py (the
# docs/operating.md's table is generated from it).
globals().update({knob.name: knob.read(env) for knob in knobs.SETTINGS})
# The write gates judge every memory.set (off: values are stored unjudged, `write_gates: "off"`).
LOOM_WRITE_GATES = env.boolean("LOOM_WRITE_GATES", True)
# The write gates scan (new rows x stored rows) pairs in ClickHouse when no vector mirror serves the namespace;
# a batch over this many pairs is stored unjudged (write_gates: "skipped").
LOOM_WRITE_GATES_MAX_PAIRS = env.integer("LOOM_WRITE_GATES_MAX_PAIRS", 1_000_000, minimum=0)
# From this many rows in a namespace's mirror, the write gates compare a batch with the rows of the cells nearest each
# value (retrieval/store/cells.py) instead of with every row: a cost that grows with the cells read (bench/gates.py).
LOOM_WRITE_GATES_EXACT_ROWS = env.integer("LOOM_WRITE_GATES_EXACT_ROWS", 20_000, minimum=0)
# Adaptive thresholds: derive the gates from the live embedder's probe (fakes keep the scalars).
LOOM_ADAPTIVE_THRESHOLDS = env.boolean("LOOM_ADAPTIVE_THRESHOLDS", True)
LOOM_CALIBRATION_REFRESH_SECONDS = env.number("LOOM_CALIBRATION_REFRESH_SECONDS", 60.0, minimum=0)
# The recalibration worker (retrieval/gates/recalibration.py): the embedder probed again weekly, in the server process.
LOOM_RECALIBRATION_ENABLED = env.boolean("LOOM_RECALIBRATION_ENABLED", True)
LOOM_RECALIBRATION_INTERVAL_SECONDS = env.number("LOOM_RECALIBRATION_INTERVAL_SECONDS", 7 * 24 * 3600.0, minimum=0.01)
LOOM_SEARCH_TRACE_LOG_ENABLED = env.boolean("LOOM_SEARCH_TRACE_LOG_ENABLED", False)
# The embedded engine's in-process copy of each namespace's live vectors (retrieval/store/vector_mirror.py).
LOOM_VECTOR_MIRROR = env.boolean("LOOM_VECTOR_MIRROR", True)
# The embedding worker inside the server process: auto = with the embedded engine (nothing else may open its data).
LOOM_EMBEDDING_WORKER = env.choice("LOOM_EMBEDDING_WORKER", "auto", ("auto", "on", "off"))
LOOM_EMBEDDING_WORKER_INTERVAL_S = env.number("LOOM_EMBEDDING_WORKER_INTERVAL_S", 60.0, minimum=0.01)
# ...which also sweeps what failed writes left behind (retrieval/ingest/repair.py) this often, leaving rows younger
# than the grace: they may belong to a write still storing them.
LOOM_REPAIR_INTERVAL_S = env.number("LOOM_REPAIR_INTERVAL_S", 3600.0, minimum=0.01)
LOOM_REPAIR_GRACE_S = env.number("LOOM_REPAIR_GRACE_S", 600.0, minimum=0)
LOOM_VECTOR_MIRROR_MAX_ROWS = env.integer("LOOM_VECTOR_MIRROR_MAX_ROWS", 1_000_000, minimum=0)
# All mirrors together, in bytes of vectors: past it the least recently searched are dropped (4 GiB).
LOOM_VECTOR_MIRROR_MAX_BYTES = env.integer("LOOM_VECTOR_MIRROR_MAX_BYTES", 4 << 30, minimum=0)

# --- Rerankers (retrieval/search/rerank.py) ------------------------------------------
COHERE_API_KEY = env.string("COHERE_API_KEY")
LOOM_COHERE_BASE_URL = env.string("LOOM_COHERE_BASE_URL", "https://api.cohere.com")
# Operators' endpoints speaking Cohere's rerank protocol, by name: {"name": {"url", "model", "api_key_env"}}.
LOOM_RERANK_ENDPOINTS_JSON = env.string("LOOM_RERANK_ENDPOINTS_JSON")
env.check_rerank_endpoints(LOOM_RERANK_ENDPOINTS_JSON)
LOOM_RERANK_OPENAI_MODEL = env.string("LOOM_RERANK_OPENAI_MODEL", "gpt-6-luna")
LOOM_RERANK_MAX_DOCUMENTS = env.integer("LOOM_RERANK_MAX_DOCUMENTS", 100, minimum=2, maximum=1000)
LOOM_RERANK_TIMEOUT_S = env.number("LOOM_RERANK_TIMEOUT_S", 2.0, minimum=0.1)
LOOM_RERANK_LLM_TIMEOUT_S = env.number("LOOM_RERANK_LLM_TIMEOUT_S", 15.0, minimum=0.1)
LOOM_RERANK_RETRY_ATTEMPTS = env.integer("LOOM_RERANK_RETRY_ATTEMPTS", 2, minimum=1, maximum=5)
