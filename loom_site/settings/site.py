"""Django's own settings: apps, middleware, auth, static files, logging; where the service keeps its files."""

import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
import plotly

from loom_site import env

BASE_DIR = Path(__file__).resolve().parent.parent.parent
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
