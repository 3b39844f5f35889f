"""Login throttling (django-axes): repeated failures lock out the pair (username, address) for a while.
A lockout is audited. The locked-out page and the login form's own error say the same thing whether or
not the user exists, so neither reveals it."""

from __future__ import annotations

import datetime as dt
import json
import logging

from axes.backends import AxesStandaloneBackend
from axes.signals import user_locked_out
from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append

log = logging.getLogger(__name__)
MAX_RECORDED_USERNAME = 150


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' check, for sign-ins that come with a request (the login page, the admin's login). A call
    without one is host-side code (a shell, a management command, the test client): there is no address
    to throttle and axes would refuse it outright, so it falls through to the next backend."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def _printable(text: object) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in str(text or ""))[:MAX_RECORDED_USERNAME]


def _recorded_within_lockout(username: str, address: str) -> bool:
    """django-axes signals the lockout again on every attempt while it holds: one record per lockout is
    what an auditor needs, and it keeps a stream of unauthenticated attempts from writing one each."""
    since = timezone.now() - dt.timedelta(hours=settings.AXES_COOLOFF_TIME)
    return (AuditRecord.objects.filter(kind="login_lockout", created_at__gte=since)
            .filter(body__contains=f'"address":{json.dumps(address)}')
            .filter(body__contains=f'"username":{json.dumps(username)}').exists())


@receiver(user_locked_out, dispatch_uid="roster-audit-login-lockout")
def audit_lockout(sender, request=None, username=None, ip_address=None, **kwargs) -> None:
    username, address = _printable(username), _printable(ip_address)
    try:
        if _recorded_within_lockout(username, address):
            return
        audit_append("login_lockout", {"username": username, "address": address, "event": "locked_out"},
                     verdict="locked_out")
    except Exception:  # noqa: BLE001 - the lockout itself holds; a failed record is logged, not raised
        log.exception("could not audit a login lockout")
