"""Sign-in lockouts (django-axes) go on the audit chain: who was locked out, from where, by which rule.
The record never holds the password that was tried.

django-axes signals a lockout again on every attempt while it holds; one record per lockout is what an
auditor needs, and it keeps a login flood from writing a record per request."""

from __future__ import annotations

import datetime as dt
import json

from axes.signals import user_locked_out
from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append

_MAX_NAME = 150  # Django's username length; anything longer was not a username


def _already_recorded(username: str, address: str) -> bool:
    since = timezone.now() - dt.timedelta(hours=settings.AXES_COOLOFF_TIME)
    return (AuditRecord.objects.filter(kind="login", created_at__gte=since)
            .filter(body__contains=f'"address":{json.dumps(address)}')
            .filter(body__contains=f'"username":{json.dumps(username)}').exists())


@receiver(user_locked_out, dispatch_uid="roster-signin-lockout")
def audit_lockout(sender, request=None, username=None, ip_address=None, **_kwargs) -> None:
    username, address = str(username or "")[:_MAX_NAME], str(ip_address or "")
    if _already_recorded(username, address):
        return
    audit_append("login", {
        "event": "locked_out", "username": username, "address": address,
        "failures": settings.AXES_FAILURE_LIMIT, "lockout_minutes": round(settings.AXES_COOLOFF_TIME * 60),
    }, verdict="deny", reason="login_locked_out")
