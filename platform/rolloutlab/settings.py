"""Settings, all from the environment (docs/deploy.md lists every variable).

With no DATABASE_URL and no REDIS_URL the platform runs embedded: SQLite, an
in-memory channel layer and runs executed in the web process, so it works on a
machine with nothing but Python. With them set it is PostgreSQL + Redis + Celery.
"""

import os
from datetime import timedelta
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
        # a connection per request, closed at its end, as Django documents for ASGI: each request's database
        # work runs in a thread of its own, and a persistent connection outlived its thread, unclosed
        # (tests/live/platform/test_database_connections.py). PgBouncer in front for many short connections.
        "CONN_MAX_AGE": 0,
    }


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """`HTTP_X_FORWARDED_PROTO,https`: the header (as Django names it in META) and the value that means HTTPS."""
    value = os.environ.get(name)
    if not value:
        return None
    parts = [part.strip() for part in value.split(",")]
    if len(parts) != 2 or not parts[0].startswith("HTTP_") or not parts[1]:
        raise ImproperlyConfigured(f"{name} must be HEADER,VALUE such as HTTP_X_FORWARDED_PROTO,https, not {value!r}")
    return parts[0], parts[1]


DATABASE_URL = secret("DATABASE_URL")
REDIS_URL = secret("REDIS_URL")
EMBEDDED = not DATABASE_URL and not REDIS_URL
DEBUG = envbool("DEBUG", default=EMBEDDED)

# Team mode (either URL set) trains only on Celery workers: a run inside the web process would hold
# the server's memory and threads, and die with each deploy. Half a configuration is refused at startup.
if DATABASE_URL and not REDIS_URL:
    raise ImproperlyConfigured(
        "DATABASE_URL is set but REDIS_URL is not: a team deployment needs Redis (the Celery broker and the "
        "Channels layer), or runs would train inside the web process. Set REDIS_URL, or unset DATABASE_URL "
        "for the single-user embedded mode."
    )
if REDIS_URL and not DATABASE_URL:
    raise ImproperlyConfigured(
        "REDIS_URL is set but DATABASE_URL is not: Celery workers cannot share the embedded SQLite database. "
        "Set DATABASE_URL (postgres://...), or unset REDIS_URL for the single-user embedded mode."
    )

RUN_EXECUTOR = os.environ.get("RUN_EXECUTOR", "inprocess" if EMBEDDED else "celery")
if RUN_EXECUTOR not in ("celery", "inprocess"):
    raise ImproperlyConfigured(f"RUN_EXECUTOR must be celery or inprocess, not {RUN_EXECUTOR!r}")
if RUN_EXECUTOR == "inprocess" and not EMBEDDED:
    raise ImproperlyConfigured(
        "RUN_EXECUTOR=inprocess is for the embedded mode only: with DATABASE_URL and REDIS_URL set, runs "
        "execute on Celery workers (unset RUN_EXECUTOR)."
    )

EMBEDDED_SECRET_KEY = "embedded-mode-only-not-a-secret"
# Keys anyone can read (this file, .env.example): signing with one lets anyone forge sessions and share links.
PUBLIC_SECRET_KEYS = (EMBEDDED_SECRET_KEY, "change-me-to-a-long-random-string")
SECRET_KEY = secret("SECRET_KEY")
if EMBEDDED:
    SECRET_KEY = SECRET_KEY or EMBEDDED_SECRET_KEY
elif not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set outside the embedded mode")
elif SECRET_KEY in PUBLIC_SECRET_KEYS or "change-me" in SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is a published example value (the embedded mode's or .env.example's): anyone could sign "
        'sessions with it. Set your own, e.g. python -c "import secrets; print(secrets.token_urlsafe(50))"'
    )
elif len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:  # Django's own bar for a key (check --deploy, W009)
    raise ImproperlyConfigured(
        f"SECRET_KEY is too weak to sign sessions and share links ({len(SECRET_KEY)} characters, "
        f"{len(set(SECRET_KEY))} distinct; at least 50 and 5): "
        'set a random one, e.g. python -c "import secrets; print(secrets.token_urlsafe(50))"'
    )
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

# HTTPS (docs/deploy.md, "Production"): off by default so that http://localhost works; on behind TLS.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", False)
SECURE_PROXY_SSL_HEADER = proxy_ssl_header("SECURE_PROXY_SSL_HEADER")  # only behind a proxy that sets it
# The debug page masks DATABASE_URL, REDIS_URL and the password of any URL (rolloutlab/errorreports.py)
DEFAULT_EXCEPTION_REPORTER_FILTER = "rolloutlab.errorreports.SecretUrlFilter"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",
    "rolloutlab.accounts",
    "rolloutlab.runs",
    "rolloutlab.metrics",
    "rolloutlab.compare",
    "rolloutlab.audit",
    "rolloutlab.alerts",
    "axes",  # login throttling (AXES_* below)
]

MIDDLEWARE = [
    "rolloutlab.outages.Outages",  # PostgreSQL or Redis away: 503 with a message, never a 500
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files from the app server itself, no nginx needed
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "rolloutlab.middleware.JsonApiErrors",
    "axes.middleware.AxesMiddleware",  # last, as axes asks: turns a locked-out login into the 429 page
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
    # channels_redis waits for a message with a blocking pop of 5 s (its brpop_timeout); redis-py 8 reads with a
    # socket timeout of 5 s by default, so an idle socket's wait raised a timeout and dropped the browser's
    # websocket every ~5 s (channels_redis#422). A read timeout above the pop's keeps dead connections detected
    # (tests/live/platform/test_live_channel.py: an idle page for 60 s, and a Redis restart).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5}],
            },
        }
    }  # fmt: skip
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Runs execute on Celery workers in team mode, in a thread of the web process when embedded (RUN_EXECUTOR above).
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # a worker holds one run at a time
# Workers run `-P prefork --concurrency 1 --max-tasks-per-child 1` (compose.yaml): a run owns its process's
# memory, CUDA context and torch threads, and a fresh child per run gives them all back; the prefork
# pool is also the one that enforces the tasks' time limits (the solo pool cannot interrupt a task).
CELERY_WORKER_POOL = "prefork"
CELERY_WORKER_CONCURRENCY = 1
CELERY_WORKER_MAX_TASKS_PER_CHILD = 1
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 24 * 3600}  # runs are long; redelivery is refused anyway
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

STORAGE_ROOT = Path(os.environ.get("STORAGE_ROOT", BASE_DIR / "var" / "storage"))
HEARTBEAT_INTERVAL_S = envint("HEARTBEAT_INTERVAL_S", 5)
HEARTBEAT_TIMEOUT_S = envint("HEARTBEAT_TIMEOUT_S", 30)
# A trainer run whose worker stops heartbeating goes back to the queue and resumes from its last checkpoint
# on any worker, until it has had this many attempts since its launch (or a user's resume); then it is lost.
RUN_MAX_ATTEMPTS = envint("RUN_MAX_ATTEMPTS", 3)
if RUN_MAX_ATTEMPTS < 1:
    raise ImproperlyConfigured(f"RUN_MAX_ATTEMPTS must be at least 1, not {RUN_MAX_ATTEMPTS}")
# A queued run whose wake-up the broker no longer holds is sent again once it has waited this long
# (execution.dispatch.resend_lost): long enough that a message being sent is never taken for a lost one.
QUEUE_RECONCILE_AFTER_S = envint("QUEUE_RECONCILE_AFTER_S", 60)
# an external run (rolloutlab_client.client) that reports nothing for this long is marked lost
EXTERNAL_RUN_TIMEOUT_S = envint("EXTERNAL_RUN_TIMEOUT_S", 600)
METRIC_FLUSH_INTERVAL_MS = envint("METRIC_FLUSH_INTERVAL_MS", 50)
# A worker's writes while the database is unreachable: retried with backoff up to REPORTER_RETRY_MAX_S
# between tries, for REPORTER_RETRY_FOR_S in all (then the run fails); past REPORTER_BUFFER_POINTS
# buffered metric points the trainer waits for the database instead of growing the buffer.
REPORTER_RETRY_MAX_S = envint("REPORTER_RETRY_MAX_S", 5)
REPORTER_RETRY_FOR_S = envint("REPORTER_RETRY_FOR_S", 600)
REPORTER_BUFFER_POINTS = envint("REPORTER_BUFFER_POINTS", 1_000_000)
# After a round the run monitor could not complete (the database away), no run is declared
# lost until its workers have had HEARTBEAT_TIMEOUT_S to beat again.

# Per-deployment ceilings on what sizes a run (shown in the launch form; a config over one is a field error)
RUN_LIMITS = {
    "rollouts_per_step": envint("LIMIT_ROLLOUTS_PER_STEP", 4096),  # rollout.prompts_per_step x group_size
    "max_new_tokens": envint("LIMIT_MAX_NEW_TOKENS", 4096),
    "model_parameters": envint("LIMIT_MODEL_PARAMETERS", 100_000_000),  # the built-in tiny model's size
    "eval_samples": envint("LIMIT_EVAL_SAMPLES", 100_000),  # eval.size x samples per prompt
    "steps": envint("LIMIT_STEPS", 100_000),
    "warmup_examples": envint("LIMIT_WARMUP_EXAMPLES", 10_000_000),  # model.warmup_steps x warmup_batch_size
    "threads": envint("LIMIT_THREADS", 64),
    "rollout_actors": envint("LIMIT_ROLLOUT_ACTORS", 64),  # resources.rollout_actors of a run on Ray
    "wall_time_s": envint("LIMIT_WALL_TIME_S", 24 * 3600),  # resources.wall_time_s, and its value when unset
}
# A run's Celery task: soft time limit wall_time_s + grace (the run fails with a message), hard limit
# wall_time_s + 2 x grace (the worker's child process is killed: a run stuck where no Python runs).
RUN_TIME_LIMIT_GRACE_S = envint("RUN_TIME_LIMIT_GRACE_S", 60)
MAX_ACTIVE_RUNS_PER_USER = envint("MAX_ACTIVE_RUNS_PER_USER", 20)  # queued + running, per user


# Where a run's dataset files (DATA_ROOTS) and model directories (MODEL_ROOTS) may be: a path elsewhere is a field
# error at launch (and at bundle import), never a read by a worker. os.pathsep-separated; the built-in tiny model
# and the packaged models need none. The launch form's model picker lists the saved models under MODEL_ROOTS.
def _roots(setting: str, default: Path) -> list[Path]:
    return [Path(p).resolve() for p in os.environ.get(setting, str(default)).split(os.pathsep) if p.strip()]


DATA_ROOTS = _roots("DATA_ROOTS", BASE_DIR / "data")
MODEL_ROOTS = _roots("MODEL_ROOTS", BASE_DIR / "models")

# Bundles: this deployment signs its exports with its own Ed25519 key (PEM, or base64 of the 32 raw bytes;
# `python -m workers bundle-key --out key.pem` makes one) and trusts the signatures of BUNDLE_TRUSTED_KEYS
# (comma-separated base64 public keys; its own is always trusted). Anything else imports as "unverified".
BUNDLE_SIGNING_KEY = secret("BUNDLE_SIGNING_KEY")
BUNDLE_SIGNING_KEY_AUTO = None  # embedded only: a key made on first use, kept under var/
if not BUNDLE_SIGNING_KEY:
    if not EMBEDDED and not DEBUG:
        raise ImproperlyConfigured(
            "BUNDLE_SIGNING_KEY (or BUNDLE_SIGNING_KEY_FILE) must be set outside the embedded mode"
        )
    BUNDLE_SIGNING_KEY_AUTO = BASE_DIR / "var" / "bundle_signing_key.pem"
BUNDLE_TRUSTED_KEYS = [k.strip() for k in os.environ.get("BUNDLE_TRUSTED_KEYS", "").split(",") if k.strip()]
# What an import accepts, checked from the zip's central directory before anything is decompressed
BUNDLE_MAX_BYTES = envint("BUNDLE_MAX_BYTES", 512 * 2**20)  # the upload itself
BUNDLE_FORM_SLACK = 64 * 1024  # a form's boundaries, headers and small fields beside the bundle
BUNDLE_MAX_MEMBERS = envint("BUNDLE_MAX_MEMBERS", 16)
BUNDLE_MAX_MEMBER_BYTES = envint("BUNDLE_MAX_MEMBER_BYTES", 256 * 2**20)  # one member, decompressed
BUNDLE_MAX_TOTAL_BYTES = envint("BUNDLE_MAX_TOTAL_BYTES", 1024 * 2**20)  # all members, decompressed
BUNDLE_MAX_RATIO = envint("BUNDLE_MAX_RATIO", 100)  # decompressed / compressed, for members over 1 MiB
# Uploads (bundles are the only files uploaded): small ones in memory, others spooled to disk up to
# BUNDLE_MAX_BYTES and stopped there; form fields stay under Django's DATA_UPLOAD_MAX_MEMORY_SIZE.
# daphne refuses a body over its route's cap before reading it (rolloutlab/serving.py): the bundle routes take
# BUNDLE_MAX_BYTES, every other one this much (Django's own cap on a form or JSON body is 2.5 MB)
REQUEST_MAX_BYTES = envint("REQUEST_MAX_BYTES", 4 * 2**20)
# an open run socket reads its holder's access again at its first event this long after the last check
SOCKET_ACCESS_RECHECK_S = envint("SOCKET_ACCESS_RECHECK_S", 30)
UPLOADS_AT_ONCE = envint("UPLOADS_AT_ONCE", 2)  # bodies over it received at once (each is held in memory whole)
FILE_UPLOAD_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "rolloutlab.audit.uploads.CappedUploadHandler",
]

AUTH_PASSWORD_VALIDATORS = [] if EMBEDDED else [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]  # fmt: skip
# Repeated failed logins are throttled (django-axes): after LOGIN_FAILURE_LIMIT failures for one username
# from one address, that pair gets 429 and templates/registration/locked_out.html for LOGIN_LOCKOUT_MINUTES.
# API tokens are 256-bit random values, hashed: guessing one is not a password attack, so they are not counted.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = envint("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=envint("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # one address cannot lock a user out everywhere
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# The client's address: REMOTE_ADDR, unless behind the TLS proxy (SECURE_PROXY_SSL_HEADER set), whose last
# X-Forwarded-For entry is then believed; a client talking to daphne directly could forge that header.
AXES_CLIENT_IP_CALLABLE = "rolloutlab.accounts.addresses.client_address"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "rolloutlab.staticfiles.PlotlyFinder",  # vendor/plotly.min.js, from the plotly package itself
]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "var" / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start when it is missing
# `collectstatic` (make demo, the image's build, the test session) writes every file under a name with its
# content's hash, plus .gz and .br copies: WhiteNoise serves them compressed with a max-age of ten years.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "rolloutlab.staticfiles.StaticStorage"},
}
WHITENOISE_USE_FINDERS = True  # a file not collected yet is still served, uncompressed, under its plain name
WHITENOISE_KEEP_ONLY_HASHED_FILES = True  # pages name the hashed files only; compress those alone

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}

# Alerts (rolloutlab.alerts): e-mail through Django's mail backend (EMAIL_* as Django reads them; the console in
# the embedded mode), webhooks POSTed to addresses outside the deployment's own network unless allowed here
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if EMBEDDED else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "rolloutlab@localhost")
ALERT_WEBHOOKS_TO_PRIVATE = envbool("ALERT_WEBHOOKS_TO_PRIVATE", False)
