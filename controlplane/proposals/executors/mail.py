"""Send the proposal's e-mail through the destination's SMTP relay, STARTTLS and login as configured.
The Message-ID is the proposal's idempotency key. A failure before the relay accepted the message is
worth a retry; once the message data was sent, an unclear answer is final (a retry could send it twice)."""

from __future__ import annotations

import base64
import smtplib
import ssl
from email.message import EmailMessage

from django.conf import settings

from controlplane.proposals.executors import Outcome
from controlplane.proposals.validation import recipient_allowed


def build_message(proposal) -> EmailMessage:
    """The message exactly as it will be sent (also what the approval queue shows)."""
    payload, dest = proposal.payload, proposal.destination
    message = EmailMessage()
    message["From"] = dest.from_address
    message["To"] = ", ".join(payload["to"])
    message["Subject"] = payload["subject"]
    message["Message-ID"] = f"<{proposal.idempotency_key}@roster.invalid>"
    message.set_content(payload["body"])
    for attachment in payload.get("attachments") or []:
        maintype, _, subtype = attachment["content_type"].partition("/")
        message.add_attachment(
            base64.b64decode(attachment["content_b64"]),
            maintype=maintype,
            subtype=subtype,
            filename=attachment["filename"],
        )
    return message


def send(proposal, credential: str | None) -> Outcome:
    dest = proposal.destination
    refused = [a for a in proposal.payload["to"] if not recipient_allowed(a, dest.allowed_recipients or [])]
    if refused:  # the destination changed since the proposal was accepted
        return Outcome(
            ok=False, transient=False, summary="recipient no longer allowed", detail=", ".join(refused)
        )
    message = build_message(proposal)
    data_sent = False
    try:
        with smtplib.SMTP(
            dest.smtp_host, dest.smtp_port, timeout=settings.ROSTER_EXECUTOR_TIMEOUT_SECONDS
        ) as smtp:
            smtp.ehlo()
            if dest.starttls:
                smtp.starttls(context=ssl.create_default_context())
                smtp.ehlo()
            if dest.login:
                smtp.login(dest.login, credential or "")
            data_sent = True
            refused_now = smtp.send_message(
                message, from_addr=dest.from_address, to_addrs=proposal.payload["to"]
            )
    except smtplib.SMTPResponseException as exc:
        code = exc.smtp_code
        transient = 400 <= code < 500 and not data_sent
        return Outcome(ok=False, transient=transient, summary=f"SMTP {code}", detail=_text(exc.smtp_error))
    except smtplib.SMTPRecipientsRefused as exc:
        return Outcome(
            ok=False, transient=False, summary="recipients refused", detail=str(list(exc.recipients))
        )
    except (OSError, smtplib.SMTPException) as exc:
        if data_sent:
            return Outcome(
                ok=False,
                transient=False,
                summary="outcome unknown",
                detail=f"{type(exc).__name__} after the message was handed to the relay",
            )
        return Outcome(ok=False, transient=True, summary="no answer", detail=type(exc).__name__)
    if refused_now:
        return Outcome(
            ok=True,
            transient=False,
            summary="SMTP 250, some recipients refused",
            detail=str(sorted(refused_now)),
        )
    return Outcome(ok=True, transient=False, summary="SMTP 250", detail=message["Message-ID"])


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
