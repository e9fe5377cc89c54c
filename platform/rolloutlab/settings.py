"""Settings, all from the environment (docs/deploy.md lists every variable).

With no DATABASE_URL and no REDIS_URL the platform runs embedded: SQLite, an
in-memory channel layer and runs executed in the web process, so it works on a
machine with nothing but Python. With them set it is PostgreSQL + Redis + Celery.
"""

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent  # the checkout


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value not in ("True", "False", "true", "false", "1", "0"):
        raise ImproperlyConfigured(f"{name} must be True or False, not {value!r}")
    return value in ("True", "true", "1")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    try:
        return default if value is None else int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None


def secret(name: str) -> str | None:
    """A secret from NAME, or from the file NAME_FILE names (for Docker/Kubernetes secrets)."""
    if os.environ.get(f"{name}_FILE"):
        return Path(os.environ[f"{name}_FILE"]).read_text().strip()
    return os.environ.get(name)


def database_from_url(url: str) -> dict:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgres:// URL, not {parsed.scheme!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


DATABASE_URL = os.environ.get("DATABASE_URL")
REDIS_URL = os.environ.get("REDIS_URL")
EMBEDDED = not DATABASE_URL and not REDIS_URL
DEBUG = envbool("DEBUG", default=EMBEDDED)

SECRET_KEY = secret("SECRET_KEY")
if not SECRET_KEY:
    if not EMBEDDED and not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set outside the embedded mode")
    SECRET_KEY = "embedded-mode-only-not-a-secret"
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rolloutlab.accounts",
    "rolloutlab.runs",
    "rolloutlab.metrics",
    "rolloutlab.compare",
    "rolloutlab.audit",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files from the app server itself, no nginx needed
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "rolloutlab.urls"
ASGI_APPLICATION = "rolloutlab.asgi.application"
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
            ]
        },
    }
]

if DATABASE_URL:
    DATABASES = {"default": database_from_url(DATABASE_URL)}
else:
    SQLITE_PATH = Path(os.environ.get("SQLITE_PATH", BASE_DIR / "var" / "rolloutlab.sqlite3"))
    SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_PATH),
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if REDIS_URL:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Runs execute on Celery workers when there is a broker, else in a thread of the web process.
RUN_EXECUTOR = os.environ.get("RUN_EXECUTOR", "celery" if REDIS_URL else "inprocess")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # a worker holds one run at a time
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 24 * 3600}  # runs are long; redelivery is refused anyway
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

STORAGE_ROOT = Path(os.environ.get("STORAGE_ROOT", BASE_DIR / "var" / "storage"))
HEARTBEAT_INTERVAL_S = envint("HEARTBEAT_INTERVAL_S", 5)
HEARTBEAT_TIMEOUT_S = envint("HEARTBEAT_TIMEOUT_S", 30)
METRIC_FLUSH_INTERVAL_MS = envint("METRIC_FLUSH_INTERVAL_MS", 50)

AUTH_PASSWORD_VALIDATORS = [] if EMBEDDED else [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]  # fmt: skip
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "var" / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start when it is missing
WHITENOISE_USE_FINDERS = True  # serve straight from static/: no collectstatic step to forget

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
