"""Optional mail to approvers when a request is held, through a configured SMTP relay
(ROSTER_APPROVAL_MAIL_HOST; off when empty). Sent after the decision commits, on its own thread, so the
gateway's answer never waits for mail. The message names the worker, the method and the host, and points
at the queue; it never quotes what the box wrote (path, headers, body)."""

from __future__ import annotations

import logging
import smtplib
import threading
from email.message import EmailMessage
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q

from controlplane.approvals.models import Approval

log = logging.getLogger(__name__)
DECIDE = ("approvals", "decide_approval")


def approver_addresses() -> list[str]:
    app, code = DECIDE
    perm = Q(groups__permissions__content_type__app_label=app, groups__permissions__codename=code) | Q(
        user_permissions__content_type__app_label=app, user_permissions__codename=code) | Q(is_superuser=True)
    users = get_user_model().objects.filter(perm, is_active=True).exclude(email="").distinct()
    return sorted({u.email for u in users})


def build(approval: Approval, recipients: list[str]) -> EmailMessage:
    host = urlsplit(str(approval.request.get("url", ""))).hostname or "?"
    method = str(approval.request.get("method", "?"))[:16]
    message = EmailMessage()
    message["Subject"] = f"Roster: {approval.run.worker.name} waits for approval ({method} {host})"
    message["From"] = settings.ROSTER_APPROVAL_MAIL_FROM
    message["To"] = ", ".join(recipients)
    message.set_content(
        f"Worker {approval.run.worker.name} (run {approval.run_id}) is held on a {method} request to "
        f"{host}.\n"
        f"Decide it in the approval queue: {settings.ROSTER_WEB_BASE_URL.rstrip('/')}/approvals/\n"
        f"Unanswered, it is refused at {approval.expires_at:%H:%M:%S} UTC.\n")
    return message


def send_now(approval_id) -> bool:
    """Send one notice; False (logged) when mail is off, nobody has an address, or the relay fails."""
    if not settings.ROSTER_APPROVAL_MAIL_HOST:
        return False
    recipients = approver_addresses()
    if not recipients:
        return False
    approval = Approval.objects.select_related("run__worker").get(pk=approval_id)
    try:
        with smtplib.SMTP(settings.ROSTER_APPROVAL_MAIL_HOST, settings.ROSTER_APPROVAL_MAIL_PORT,
                          timeout=settings.ROSTER_APPROVAL_MAIL_TIMEOUT_SECONDS) as smtp:
            smtp.send_message(build(approval, recipients))
    except (OSError, smtplib.SMTPException) as exc:
        log.warning("approval mail for %s not sent: %s", approval_id, type(exc).__name__)
        return False
    return True


def notify_later(approval_id) -> None:
    """Called on commit of the decision that opened the approval."""
    if settings.ROSTER_APPROVAL_MAIL_HOST:
        threading.Thread(target=_send_and_close, args=(approval_id,), daemon=True).start()


def _send_and_close(approval_id) -> None:
    from django.db import connection

    try:
        send_now(approval_id)
    except Exception:  # noqa: BLE001 - mail is a courtesy; the queue is the truth
        log.exception("approval mail failed")
    finally:
        connection.close()
