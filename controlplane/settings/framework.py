"""Django itself: the secret key, hosts, apps, middleware, templates, static files, logging."""

import os
import secrets
import time
from pathlib import Path

from controlplane.core.env import env
from controlplane.settings.base import BASE_DIR, VAR_DIR


def _django_secret_key() -> str:
    """Signs sessions, CSRF tokens and messages. From the environment, else from a file made once with a
    random key (mode 0600): never a default that anyone who read this code would know."""
    key = env.str("ROSTER_DJANGO_SECRET_KEY", "")
    if key:
        return key
    path = env.path("ROSTER_DJANGO_SECRET_KEY_FILE", VAR_DIR / "django-secret.key")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
    for _ in range(50):  # another process may have created the file a moment ago and be writing it
        key = Path(path).read_text().strip()
        if key:
            return key
        time.sleep(0.01)
    raise RuntimeError(f"{path} is empty; delete it to have a new key made")


SECRET_KEY = _django_secret_key()
DEBUG = env.bool("ROSTER_DEBUG", False)
ALLOWED_HOSTS = list(env.list("ROSTER_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"]))
CSRF_TRUSTED_ORIGINS = list(env.list("ROSTER_CSRF_TRUSTED_ORIGINS"))

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
    "controlplane.agents",
    "controlplane.proposals",
    "controlplane.conversations",
    "controlplane.memory",
    "controlplane.knowledge",
    "controlplane.journal",
    "controlplane.relay",
    "controlplane.web",
    "controlplane.demo",
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
            ],
            # One way to write time on every page (controlplane.core.timefmt), without a {% load %}.
            "builtins": ["controlplane.web.templatetags.roster_time"],
        },
    }
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = env.path("ROSTER_STATIC_ROOT", VAR_DIR / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Compressed copies made once at collectstatic; no manifest, so a page never fails for a missing entry.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"],
             "level": env.str("ROSTER_LOG_LEVEL", "WARNING",
                              choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))},
}
