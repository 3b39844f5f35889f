"""The web pages: sign-in throttling, page sizes, where people reach the server."""

from controlplane.core.env import env

# Login throttling (django-axes, controlplane/web/login_throttle.py): after this many failures the
# pair (username, client address) is locked out for the cool-off. Audited as `login_lockout`.
AUTHENTICATION_BACKENDS = [
    "controlplane.web.login_throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("ROSTER_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env.int("ROSTER_LOGIN_COOLOFF_MINUTES", 15, minimum=1) / 60  # hours, as axes takes it
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Where approvers open the queue from a mail (the web server's address as people reach it).
ROSTER_WEB_BASE_URL = env.str("ROSTER_WEB_BASE_URL", "http://127.0.0.1:8000")
ROSTER_WEB_AUDIT_PAGE_SIZE = env.int("ROSTER_WEB_AUDIT_PAGE_SIZE", 50, minimum=1)
ROSTER_WEB_RECENT_DECISIONS = env.int("ROSTER_WEB_RECENT_DECISIONS", 10, minimum=0)
ROSTER_WEB_OUTPUT_PREVIEW_CHARS = env.int("ROSTER_WEB_OUTPUT_PREVIEW_CHARS", 16 * 1024, minimum=0)
# An auditor's "verify the chain" button runs at most once per this many seconds.
ROSTER_WEB_VERIFY_COOLDOWN_SECONDS = env.int("ROSTER_WEB_VERIFY_COOLDOWN_SECONDS", 30, minimum=0)
