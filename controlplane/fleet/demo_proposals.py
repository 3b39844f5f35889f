"""`make demo`'s proposals: a webhook receiver and a mail server on host loopback (what the trusted side's
executors deliver to), the two destinations naming them, an earned-trust rule for the webhook, and the
report of what the run proposed, who let it through and what arrived. The box reaches neither server: it
can only propose (docs/proposals.md)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from controlplane.fleet.models import Run, Worker
from controlplane.proposals.config_services import destination_save, trust_rule_save
from controlplane.proposals.models import Proposal, TrustRule
from controlplane.proposals.validation import validate_destination

HOOK_DESTINATION, MAIL_DESTINATION, HOOK_RULE = "demo-team-chat", "demo-mail", "demo-team-chat-trusted"
HOST = "127.0.0.1"
MAIL_TO = "team@example.com"
FINAL = (Proposal.Status.EXECUTED, Proposal.Status.FAILED, Proposal.Status.REFUSED, Proposal.Status.EXPIRED)


@dataclass
class Deliveries:
    posts: list[dict] = field(default_factory=list)
    mails: list[bytes] = field(default_factory=list)


def proposal_steps() -> list[dict]:
    """What the scripted model makes the agent propose: a post (an earned-trust rule lets it through) and an
    e-mail (held for a person)."""
    return [
        {"say": "Posting the summary to the team chat.", "tool": "propose", "arguments": {
            "kind": "webhook", "destination": HOOK_DESTINATION,
            "payload": {"text": "Release 1.4 ships Friday; the deploy pipeline is green."},
            "reason": "the task asks to post the summary"}},
        {"say": "And mailing it to the team.", "tool": "propose", "arguments": {
            "kind": "email", "destination": MAIL_DESTINATION,
            "payload": {"to": [MAIL_TO], "subject": "Release 1.4 status",
                        "body": "Release 1.4 ships on Friday (owner Ana, no blockers).\n"
                                "The deploy pipeline is green.\n"},
            "reason": "the team should have the status in their inbox"}},
    ]


def _hook_handler(deliveries: Deliveries):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            deliveries.posts.append({"body": json.loads(body or b"null"),
                                     "idempotency_key": self.headers.get("idempotency-key", "")})
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    return Handler


@contextlib.contextmanager
def receivers(hook_port: int, smtp_port: int) -> Iterator[Deliveries]:
    from aiosmtpd.controller import Controller  # the demo's mail server (a development dependency)

    deliveries = Deliveries()

    class MailBox:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            deliveries.mails.append(envelope.content)
            return "250 Message accepted for delivery"

    hook = ThreadingHTTPServer((HOST, hook_port), _hook_handler(deliveries))
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    smtp = Controller(MailBox(), hostname=HOST, port=smtp_port)
    smtp.start()
    try:
        yield deliveries
    finally:
        smtp.stop()
        hook.shutdown()
        hook.server_close()


def setup(worker: Worker, hook_port: int, smtp_port: int) -> None:
    """The two destinations and the webhook's earned-trust rule (re-made on every demo run)."""
    hook, _ = destination_save(validate_destination(
        {"kind": "webhook", "url": f"http://{HOST}:{hook_port}/chat", "method": "POST",
         "description": "make demo: the team chat (a local receiver)"}, name=HOOK_DESTINATION),
        actor="make demo", via="demo")
    destination_save(validate_destination(
        {"kind": "smtp", "smtp_host": HOST, "smtp_port": smtp_port, "starttls": False,
         "from_address": "demo@example.com", "allowed_recipients": [MAIL_TO], "daily_limit": 50,
         "description": "make demo: a local mail server"}, name=MAIL_DESTINATION),
        actor="make demo", via="demo")
    rule = TrustRule.objects.filter(name=HOOK_RULE).first() or TrustRule(name=HOOK_RULE)
    rule.worker, rule.destination, rule.kind = worker, hook, "webhook"
    rule.max_per_day, rule.enabled = 50, True
    trust_rule_save(rule, actor="make demo", via="demo")


def pending(run: Run):
    return Proposal.objects.filter(run=run, status=Proposal.Status.PENDING).select_related("destination")


def unsettled(run: Run) -> bool:
    return Proposal.objects.filter(run=run).exclude(status__in=FINAL).exists()


def report_lines(run: Run, deliveries: Deliveries) -> list[str]:
    lines = ["", "== what it proposed (proposals, decided and performed on the trusted side)"]
    for p in Proposal.objects.filter(run=run).select_related("destination", "trust_rule", "decided_by"):
        who = (f"earned-trust rule {p.trust_rule.name}" if p.trust_rule_id
               else p.decided_by.get_username() if p.decided_by_id else "nobody")
        outcome = (p.result or {}).get("summary", "")
        lines.append(f"  {p.kind} -> {p.destination.name if p.destination_id else 'identity'}: {p.status}"
                     f" (approved by {who}){f', {outcome}' if outcome else ''}")
    lines.append(f"  delivered: {len(deliveries.posts)} webhook post(s), {len(deliveries.mails)} e-mail(s) "
                 "(the box reached neither server; the executors did)")
    return lines
