"""Login throttling (django-axes): repeated failures lock out the pair (username, address) for a while.
A lockout is audited. The locked-out page and the login form's own error say the same thing whether or
not the user exists, so neither reveals it."""

from __future__ import annotations

import logging

from axes.backends import AxesStandaloneBackend
from axes.signals import user_locked_out
from django.dispatch import receiver

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


@receiver(user_locked_out, dispatch_uid="roster-audit-login-lockout")
def audit_lockout(sender, request=None, username=None, ip_address=None, **kwargs) -> None:
    try:
        audit_append("login_lockout", {"username": _printable(username), "address": _printable(ip_address),
                                       "event": "locked_out"}, verdict="locked_out")
    except Exception:  # noqa: BLE001 - the lockout itself holds; a failed record is logged, not raised
        log.exception("could not audit a login lockout")
