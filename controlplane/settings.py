"""Settings read from the environment. Defaults suit one machine: SQLite under var/, Redis on loopback."""

import os
import secrets
import time
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("ROSTER_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))




def _django_secret_key() -> str:
    """Signs sessions, CSRF tokens and messages. From the environment, else from a file made once with a
    random key (mode 0600): never a default that anyone who read this code would know."""
    if os.environ.get("ROSTER_DJANGO_SECRET_KEY"):
        return os.environ["ROSTER_DJANGO_SECRET_KEY"]
    path = Path(os.environ.get("ROSTER_DJANGO_SECRET_KEY_FILE", VAR_DIR / "django-secret.key"))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
    for _ in range(50):  # another process may have created the file a moment ago and be writing it
        key = path.read_text().strip()
        if key:
            return key
        time.sleep(0.01)
    raise RuntimeError(f"{path} is empty; delete it to have a new key made")


SECRET_KEY = _django_secret_key()
DEBUG = os.environ.get("ROSTER_DEBUG", "0") == "1"
ALLOWED_HOSTS = os.environ.get("ROSTER_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("ROSTER_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "controlplane.core",
    "controlplane.fleet",
    "controlplane.vault",
    "controlplane.policy",
    "controlplane.ledger",
    "controlplane.audit",
    "controlplane.approvals",
    "controlplane.dispatch",
    "controlplane.proposals",
    "controlplane.web",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The admin's styles and scripts (collected into STATIC_ROOT by `manage.py collectstatic`, which
    # `make up` and the image build run), served with DEBUG off by the same process as the pages.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes, controlplane/web/login_throttle.py): after this many failures the
# pair (username, client address) is locked out for the cool-off. Audited as `login_lockout`.
AUTHENTICATION_BACKENDS = [
    "controlplane.web.login_throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = _env_int("ROSTER_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = _env_int("ROSTER_LOGIN_COOLOFF_MINUTES", 15) / 60  # hours, as axes takes it
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False


ROOT_URLCONF = "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"

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

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'roster.sqlite3'}"), conn_max_age=60
    )
}
ROSTER_SQLITE_WAL_AUTOCHECKPOINT_PAGES = _env_int("ROSTER_SQLITE_WAL_AUTOCHECKPOINT_PAGES", 4000)
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # IMMEDIATE makes every transaction take the write lock up front, so two writers can never read
    # the same chain head or ledger total and both append (the chain and the caps rely on this).
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        # A WAL checkpoint (copy back + fsync) runs inside the commit that crosses the threshold: at
        # SQLite's default of 1000 pages that was a ~10 ms stall every ~30 decisions (0.3 ms each on
        # average); 4000 pages stalls a quarter as often, ~25 ms each.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                        f"PRAGMA wal_autocheckpoint={ROSTER_SQLITE_WAL_AUTOCHECKPOINT_PAGES};",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file (not :memory:) so servers started by tests can share it; one per process so parallel
    # runs don't collide.
    DATABASES["default"].setdefault("TEST", {})["NAME"] = os.environ.get(
        "ROSTER_TEST_DB", str(VAR_DIR / f"test-roster-{os.getpid()}.sqlite3")
    )

# Prepared statements on PostgreSQL (server-side parameter binding; psycopg prepares a statement from
# its fifth use on a connection): the decision API's process turns them on (controlplane.decision_server),
# where the same few statements run for every request and parsing and planning them again cost as much
# as running them (docs/operations.md, "Benchmarks"). Off elsewhere, and "0" turns them off there too
# (behind a transaction-mode connection pooler, which cannot keep a session's prepared statements).
_prepared = os.environ.get("ROSTER_DB_PREPARED_STATEMENTS", "0")
if _prepared not in ("0", "1"):
    raise ImproperlyConfigured(f"ROSTER_DB_PREPARED_STATEMENTS must be 0 or 1, not {_prepared!r}")
ROSTER_DB_PREPARED_STATEMENTS = _prepared == "1"
if ROSTER_DB_PREPARED_STATEMENTS and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("ROSTER_STATIC_ROOT", VAR_DIR / "static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Compressed copies made once at collectstatic; no manifest, so a page never fails for a missing entry.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# A receiver waits on Redis in blocking pops of 5 s (channels_redis); redis-py's default read timeout is
# also 5 s, so an idle receiver (a queue page's websocket, the decision API's approval listener) failed
# with a read timeout every few seconds and reconnected. Reads may take this long instead.
ROSTER_CHANNELS_REDIS_READ_TIMEOUT_SECONDS = _env_float("ROSTER_CHANNELS_REDIS_READ_TIMEOUT_SECONDS", 10.0)
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": os.environ.get("ROSTER_CHANNELS_REDIS_URL", REDIS_URL),
                              "socket_timeout": ROSTER_CHANNELS_REDIS_READ_TIMEOUT_SECONDS}]},
    }
}
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = os.environ.get("ROSTER_CELERY_EAGER", "0") == "1"
CELERY_BEAT_SCHEDULE = {
    "expire-approvals": {"task": "controlplane.approvals.tasks.expire_approvals", "schedule": 5.0},
    "reap-runs": {"task": "controlplane.dispatch.tasks.reap_runs", "schedule": 15.0},
    "expire-proposals": {"task": "controlplane.proposals.tasks.expire_proposals", "schedule": 30.0},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("ROSTER_LOG_LEVEL", "WARNING")},
}

# --- The vault: secrets encrypted at rest, their sentinels ---
# The vault key lives outside the database, in a file only the control plane reads (mode 0600).
ROSTER_VAULT_KEY_FILE = Path(os.environ.get("ROSTER_VAULT_KEY_FILE", VAR_DIR / "vault.key"))
# How long a process trusts its sentinel index before checking whether another process changed secrets.
ROSTER_VAULT_SENTINEL_CACHE_SECONDS = _env_float("ROSTER_VAULT_SENTINEL_CACHE_SECONDS", 2.0)
# Largest secret value accepted (bytes); headers larger than this are not credentials.
ROSTER_VAULT_MAX_VALUE_BYTES = _env_int("ROSTER_VAULT_MAX_VALUE_BYTES", 8192)

# --- Policy: grants and their files ---
# Compiled grant rules kept in memory, keyed on the grant row's every column (rows are always re-read).
ROSTER_GRANT_RULE_CACHE_SIZE = _env_int("ROSTER_GRANT_RULE_CACHE_SIZE", 10_000)
# A grant file is a few lines; anything larger is refused by `grants check/import`.
ROSTER_GRANT_FILE_MAX_BYTES = _env_int("ROSTER_GRANT_FILE_MAX_BYTES", 64 * 1024)

# --- Egress: the decision API the gateway calls (docs/wire.md) ---
# The gateway's service credential: the control plane keeps only its SHA-256 (hex), from the environment
# or from this file, which `make up` writes next to the gateway's own copy of the raw token.
ROSTER_GATEWAY_TOKEN_SHA256_FILE = Path(
    os.environ.get("ROSTER_GATEWAY_TOKEN_SHA256_FILE", VAR_DIR / "gateway-token.sha256")
)
# When set, wins over the file; otherwise the file is read when a call is authenticated (cached by mtime),
# never at import: see controlplane.core.service_token.
ROSTER_GATEWAY_TOKEN_SHA256 = os.environ.get("ROSTER_GATEWAY_TOKEN_SHA256", "")
# The decision API's own process (python -m controlplane.decision_server; scripts/up.sh), which the gateway
# calls. Loopback only. Idle keep-alive connections from the gateway are kept this long.
ROSTER_DECISION_API_HOST = os.environ.get("ROSTER_DECISION_API_HOST", "127.0.0.1")
ROSTER_DECISION_API_PORT = _env_int("ROSTER_DECISION_API_PORT", 8002)
ROSTER_DECISION_API_KEEPALIVE_SECONDS = _env_int("ROSTER_DECISION_API_KEEPALIVE_SECONDS", 75)
# The decision API process's Prometheus metrics (controlplane.metrics; docs/operations.md, Metrics): a
# listener of its own, apart from the decision API's port, on loopback unless the operator says otherwise,
# answering only a bearer whose SHA-256 matches (scripts/mint-secrets.sh makes var/metrics.token and
# var/metrics-token.sha256). Port 0: no listener (`make up` turns it on, port 8003).
ROSTER_METRICS_HOST = os.environ.get("ROSTER_METRICS_HOST", "127.0.0.1")
ROSTER_METRICS_PORT = _env_int("ROSTER_METRICS_PORT", 0)
ROSTER_METRICS_TOKEN_SHA256_FILE = Path(
    os.environ.get("ROSTER_METRICS_TOKEN_SHA256_FILE", VAR_DIR / "metrics-token.sha256")
)
ROSTER_METRICS_TOKEN_SHA256 = os.environ.get("ROSTER_METRICS_TOKEN_SHA256", "")
# Celery queues whose length (the broker's Redis list) the metrics report.
ROSTER_METRICS_CELERY_QUEUES = tuple(
    q.strip() for q in os.environ.get("ROSTER_METRICS_CELERY_QUEUES", "celery").split(",") if q.strip()
)
# Longest wait for the broker when the metrics read its queue lengths (a scrape never hangs on Redis).
ROSTER_METRICS_BROKER_TIMEOUT_SECONDS = float(os.environ.get("ROSTER_METRICS_BROKER_TIMEOUT_SECONDS", "1"))
# Threads (each with its own database connection) serving /api/gateway/ under ASGI. Its writes all take
# the audit chain's single-writer lock, so 1 is fastest on SQLite; more only help concurrent reads.
ROSTER_GATEWAY_DB_THREADS = _env_int("ROSTER_GATEWAY_DB_THREADS", 1)
# At most this many decisions and outcome batches that arrive together share one transaction and one
# commit on the gateway API's database thread (controlplane.egress.db_thread; 1 turns grouping off).
ROSTER_GROUP_COMMIT_MAX = _env_int("ROSTER_GROUP_COMMIT_MAX", 64)
# Decision API input limits (the gateway's request facts; anything bigger is a 422, nothing decided).
ROSTER_DECIDE_MAX_HEADERS = _env_int("ROSTER_DECIDE_MAX_HEADERS", 200)
ROSTER_DECIDE_MAX_HEADER_BYTES = _env_int("ROSTER_DECIDE_MAX_HEADER_BYTES", 16 * 1024)
ROSTER_DECIDE_MAX_PATH_BYTES = _env_int("ROSTER_DECIDE_MAX_PATH_BYTES", 16 * 1024)
ROSTER_DECIDE_MAX_MCP_CALLS = _env_int("ROSTER_DECIDE_MAX_MCP_CALLS", 100)
ROSTER_BODY_PREVIEW_BYTES = _env_int("ROSTER_BODY_PREVIEW_BYTES", 4096)
# POST /api/gateway/outcomes: the most outcome reports the gateway may settle in one call (one transaction).
ROSTER_OUTCOME_BATCH_MAX = _env_int("ROSTER_OUTCOME_BATCH_MAX", 256)
ROSTER_TRACE_MAX_BYTES = _env_int("ROSTER_TRACE_MAX_BYTES", 8 * 1024 * 1024)
# /api/gateway/trace carries up to ROSTER_TRACE_MAX_BYTES as base64 in JSON; Django must accept that body.
DATA_UPLOAD_MAX_MEMORY_SIZE = ROSTER_TRACE_MAX_BYTES * 4 // 3 + 64 * 1024

# --- Approvals: held requests ---
ROSTER_APPROVAL_TTL_SECONDS = _env_int("ROSTER_APPROVAL_TTL_SECONDS", 300)
# How long the gateway holds an asked request before giving up (bounded by the approval TTL).
ROSTER_APPROVAL_HOLD_SECONDS = _env_int("ROSTER_APPROVAL_HOLD_SECONDS", 60)
ROSTER_APPROVAL_GRACE_SECONDS = _env_int("ROSTER_APPROVAL_GRACE_SECONDS", 120)
ROSTER_APPROVAL_WAIT_MAX_SECONDS = _env_float("ROSTER_APPROVAL_WAIT_MAX_SECONDS", 30.0)
# The gateway's wait on a held request is woken by the decision's announcement (approvals group of the
# channel layer) and reads the approval again every RECHECK seconds in case one was lost; every POLL
# seconds while this process is not receiving announcements (Redis down, no channel layer).
ROSTER_APPROVAL_POLL_SECONDS = _env_float("ROSTER_APPROVAL_POLL_SECONDS", 0.05)
ROSTER_APPROVAL_RECHECK_SECONDS = _env_float("ROSTER_APPROVAL_RECHECK_SECONDS", 1.0)
# An approver's comment with a decision: bounded, and required for a deny when this is on.
ROSTER_APPROVAL_COMMENT_MAX_CHARS = _env_int("ROSTER_APPROVAL_COMMENT_MAX_CHARS", 500)
ROSTER_APPROVAL_DENY_COMMENT_REQUIRED = os.environ.get("ROSTER_APPROVAL_DENY_COMMENT_REQUIRED", "") in (
    "1", "true", "yes")
# Optional mail to approvers (those with an address) when a request is held; off while the host is empty.
ROSTER_APPROVAL_MAIL_HOST = os.environ.get("ROSTER_APPROVAL_MAIL_HOST", "")
ROSTER_APPROVAL_MAIL_PORT = _env_int("ROSTER_APPROVAL_MAIL_PORT", 25)
ROSTER_APPROVAL_MAIL_FROM = os.environ.get("ROSTER_APPROVAL_MAIL_FROM", "roster@localhost")
ROSTER_APPROVAL_MAIL_TIMEOUT_SECONDS = _env_float("ROSTER_APPROVAL_MAIL_TIMEOUT_SECONDS", 10.0)
# Where approvers open the queue from a mail (the web server's address as people reach it).
ROSTER_WEB_BASE_URL = os.environ.get("ROSTER_WEB_BASE_URL", "http://127.0.0.1:8000")

# --- Runs: their limits, the command line's wait ---
ROSTER_RUN_DEFAULT_TIMEOUT_SECONDS = _env_int("ROSTER_RUN_DEFAULT_TIMEOUT_SECONDS", 600)
ROSTER_RUN_MAX_OUTPUT_BYTES = _env_int("ROSTER_RUN_MAX_OUTPUT_BYTES", 256 * 1024)
ROSTER_RUN_WAIT_POLL_SECONDS = _env_float("ROSTER_RUN_WAIT_POLL_SECONDS", 0.2)

# --- Dispatch: boxes, where they find the gateway, preflight and reaping ---
ROSTER_BOX_IMAGE = os.environ.get("ROSTER_BOX_IMAGE", "roster-box:latest")
ROSTER_BOX_NETWORK = os.environ.get("ROSTER_BOX_NETWORK", "roster-boxes")
# Where a box reaches the gateway (its proxy port), how preflight asks its health, the CA a box trusts.
ROSTER_GATEWAY_HOST = os.environ.get("ROSTER_GATEWAY_HOST", "127.0.0.1")
ROSTER_GATEWAY_PORT = _env_int("ROSTER_GATEWAY_PORT", 8080)
ROSTER_GATEWAY_HEALTH_URL = os.environ.get("ROSTER_GATEWAY_HEALTH_URL", "http://127.0.0.1:8081/healthz")
ROSTER_GATEWAY_CA_CERT = Path(
    os.environ.get("ROSTER_GATEWAY_CA_CERT", VAR_DIR / "gateway" / "mitmproxy-ca-cert.pem")
)
# A box's resource limits.
ROSTER_BOX_MEMORY = os.environ.get("ROSTER_BOX_MEMORY", "512m")
ROSTER_BOX_NANO_CPUS = _env_int("ROSTER_BOX_NANO_CPUS", 1_000_000_000)
ROSTER_BOX_PIDS_LIMIT = _env_int("ROSTER_BOX_PIDS_LIMIT", 256)
# Labels and container names carry this, so a reaper only ever touches its own boxes.
ROSTER_BOX_NAMESPACE = os.environ.get("ROSTER_BOX_NAMESPACE", "roster")
# Not 10001 (the control plane image's user, owner of the vault key) nor 10002 (the gateway's): a box
# process that ever sees host files must own none of the trusted side's.
ROSTER_BOX_UID = _env_int("ROSTER_BOX_UID", 10100)
# Per-worker code (mounted read-only at /code) lives in ROSTER_BOX_CODE_DIR/<worker>; per-run config and CAs
# under ROSTER_BOX_RUNS_DIR/<namespace>-<run id>, removed when the run ends.
ROSTER_BOX_CODE_DIR = Path(os.environ.get("ROSTER_BOX_CODE_DIR", VAR_DIR / "workers"))
ROSTER_BOX_RUNS_DIR = Path(os.environ.get("ROSTER_BOX_RUNS_DIR", VAR_DIR / "runs"))
ROSTER_BOX_TMPFS_SIZE = os.environ.get("ROSTER_BOX_TMPFS_SIZE", "64m")
# The writable workspace is memory-backed and bounded (it counts against the box's memory limit too).
ROSTER_BOX_WORKSPACE_SIZE = os.environ.get("ROSTER_BOX_WORKSPACE_SIZE", "256m")
ROSTER_DOCKER_TIMEOUT_SECONDS = _env_int("ROSTER_DOCKER_TIMEOUT_SECONDS", 30)
ROSTER_PREFLIGHT_TIMEOUT_SECONDS = _env_float("ROSTER_PREFLIGHT_TIMEOUT_SECONDS", 2.0)
# A claimed run whose box is not running by then is failed by the reaper (the dispatcher died).
ROSTER_RUN_START_GRACE_SECONDS = _env_int("ROSTER_RUN_START_GRACE_SECONDS", 120)
# How long the reaper leaves an exited box to its watcher before finalising it itself.
ROSTER_REAP_EXITED_GRACE_SECONDS = _env_int("ROSTER_REAP_EXITED_GRACE_SECONDS", 10)
# A live run of another box host this long past its deadline is failed by any host's reaper (its own host
# stopped reconciling: gone, or its worker down); ending it revokes its token at every gateway.
ROSTER_REAP_OTHER_HOST_GRACE_SECONDS = _env_int("ROSTER_REAP_OTHER_HOST_GRACE_SECONDS", 300)
# A queued run older than this is dispatched again (its message was lost); dispatch is idempotent.
ROSTER_RUN_REQUEUE_SECONDS = _env_int("ROSTER_RUN_REQUEUE_SECONDS", 60)
ROSTER_BOX_KILL_WAIT_SECONDS = _env_int("ROSTER_BOX_KILL_WAIT_SECONDS", 10)
ROSTER_IPTABLES = os.environ.get("ROSTER_IPTABLES", "iptables")
# Public CAs the box keeps trusting (for tunnel grants), combined with the gateway CA into its system store.
ROSTER_BOX_SYSTEM_CA_BUNDLE = Path(
    os.environ.get("ROSTER_BOX_SYSTEM_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
)

# --- Audit chain ---
# Audit export / verify read the chain in chunks of this many records (constant memory).
ROSTER_AUDIT_CHUNK_SIZE = _env_int("ROSTER_AUDIT_CHUNK_SIZE", 2000)
# Verify splits a long chain into seq ranges checked by this many worker processes (0: one per usable
# CPU; 1: always in-process). Below the minimum length, starting processes costs more than it saves.
ROSTER_AUDIT_VERIFY_WORKERS = _env_int("ROSTER_AUDIT_VERIFY_WORKERS", 0)
ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS = _env_int("ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS", 50_000)

# --- Web pages ---
ROSTER_WEB_AUDIT_PAGE_SIZE = _env_int("ROSTER_WEB_AUDIT_PAGE_SIZE", 50)
ROSTER_WEB_RECENT_DECISIONS = _env_int("ROSTER_WEB_RECENT_DECISIONS", 10)
ROSTER_WEB_OUTPUT_PREVIEW_CHARS = _env_int("ROSTER_WEB_OUTPUT_PREVIEW_CHARS", 16 * 1024)
ROSTER_WEB_VERIFY_COOLDOWN_SECONDS = _env_int("ROSTER_WEB_VERIFY_COOLDOWN_SECONDS", 30)

# --- The reference agent (workers/agent) ---
# The reference agent (workers/agent; `run start WORKER --agent TASK`): where its model is, passed to every
# box as ROSTER_AGENT_* variables. Not secrets: the key stays in the vault and reaches the provider only
# through a grant that injects it (the box holds the sentinel in ROSTER_AGENT_KEY_VARIABLE). To use a real
# provider, change ROSTER_AGENT_BASE_URL (and ROSTER_AGENT_MODEL) and grant its host with key injection.
ROSTER_AGENT_BASE_URL = os.environ.get("ROSTER_AGENT_BASE_URL", "https://api.openai.com/v1")
ROSTER_AGENT_MODEL = os.environ.get("ROSTER_AGENT_MODEL", "gpt-4o-mini")
ROSTER_AGENT_KEY_VARIABLE = os.environ.get("ROSTER_AGENT_KEY_VARIABLE", "OPENAI_API_KEY")
ROSTER_AGENT_MAX_TURNS = _env_int("ROSTER_AGENT_MAX_TURNS", 12)
ROSTER_AGENT_MAX_TOKENS = _env_int("ROSTER_AGENT_MAX_TOKENS", 20000)
# MCP servers the agent may call, `name=url,name=url` (each still needs a grant naming its tools).
ROSTER_AGENT_MCP_SERVERS = os.environ.get("ROSTER_AGENT_MCP_SERVERS", "")

# --- Proposals: what a box asks the trusted side to do (docs/proposals.md) ---
# The reserved name the gateway answers itself for proposals (".invalid" can never be a real host).
ROSTER_PROPOSALS_HOST = os.environ.get("ROSTER_PROPOSALS_HOST", "proposals.roster.invalid")
# A pending proposal nobody decided by then expires (never refused: expiry is not a human's no).
ROSTER_PROPOSAL_TTL_SECONDS = _env_int("ROSTER_PROPOSAL_TTL_SECONDS", 24 * 3600)
# Largest proposal body the box may send (JSON as received); bigger is 413, nothing recorded.
ROSTER_PROPOSAL_MAX_BYTES = _env_int("ROSTER_PROPOSAL_MAX_BYTES", 2 * 1024 * 1024)
# E-mail: total decoded attachment bytes and how many; body and subject limits.
ROSTER_PROPOSAL_MAX_ATTACHMENT_BYTES = _env_int("ROSTER_PROPOSAL_MAX_ATTACHMENT_BYTES", 1024 * 1024)
ROSTER_PROPOSAL_MAX_ATTACHMENTS = _env_int("ROSTER_PROPOSAL_MAX_ATTACHMENTS", 10)
ROSTER_PROPOSAL_MAX_RECIPIENTS = _env_int("ROSTER_PROPOSAL_MAX_RECIPIENTS", 20)
ROSTER_PROPOSAL_MAX_TEXT_BYTES = _env_int("ROSTER_PROPOSAL_MAX_TEXT_BYTES", 256 * 1024)
# How many of the run's received results a proposal records as "what the run saw".
ROSTER_PROPOSAL_SEEN_MAX = _env_int("ROSTER_PROPOSAL_SEEN_MAX", 50)
# Executors: attempts on a transient failure (server down, timeout, 5xx / 4xx SMTP), backoff between them.
ROSTER_EXECUTOR_MAX_ATTEMPTS = _env_int("ROSTER_EXECUTOR_MAX_ATTEMPTS", 3)
ROSTER_EXECUTOR_RETRY_SECONDS = _env_float("ROSTER_EXECUTOR_RETRY_SECONDS", 10.0)
ROSTER_EXECUTOR_TIMEOUT_SECONDS = _env_float("ROSTER_EXECUTOR_TIMEOUT_SECONDS", 20.0)
# How much of a remote's answer is kept on the proposal (its status line, the start of its body).
ROSTER_EXECUTOR_ANSWER_CHARS = _env_int("ROSTER_EXECUTOR_ANSWER_CHARS", 500)
