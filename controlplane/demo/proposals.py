"""`make demo`'s proposals beyond the team-chat post (controlplane.demo.scenario): an e-mail held for a
person, delivered by the trusted side's executor to a mail server on host loopback; an earned-trust rule
that lets the team-chat post through without one (and says so); and the report of what the run proposed,
who let it through and what arrived. The box reaches neither server: it can only propose."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from controlplane.fleet.models import Run, Worker
from controlplane.proposals.models import Destination, Proposal, TrustRule
from controlplane.proposals.services import destination_save, trust_rule_save
from controlplane.proposals.validation import validate_destination

MAIL_DESTINATION, HOOK_RULE = "demo-mail", "demo-team-chat-trusted"
HOST = "127.0.0.1"
MAIL_TO = "team@example.com"


def email_step() -> dict:
    """The scripted model's e-mail proposal (the agent's propose tool, kind email)."""
    return {"say": "And mailing it to the team.", "tool": "propose", "arguments": {
        "kind": "email", "destination": MAIL_DESTINATION,
        "payload": {"to": [MAIL_TO], "subject": "Release 1.4 status",
                    "body": "Release 1.4 ships on Friday (owner Ana, no blockers).\n"
                            "The deploy pipeline is green.\n"},
        "reason": "the team should have the status in their inbox"}}


@contextlib.contextmanager
def mail_server(port: int) -> Iterator[list[bytes]]:
    """A real SMTP server (aiosmtpd, a development dependency) collecting what the executor delivers."""
    from aiosmtpd.controller import Controller

    mails: list[bytes] = []

    class MailBox:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            mails.append(envelope.content)
            return "250 Message accepted for delivery"

    controller = Controller(MailBox(), hostname=HOST, port=port)
    controller.start()
    try:
        yield mails
    finally:
        controller.stop()


def setup(worker: Worker, hook_destination: str, smtp_port: int) -> None:
    """The mail destination and the earned-trust rule for the team-chat webhook (re-made every run)."""
    destination_save(validate_destination(
        {"kind": "smtp", "smtp_host": HOST, "smtp_port": smtp_port, "starttls": False,
         "from_address": "demo@example.com", "allowed_recipients": [MAIL_TO], "daily_limit": 50,
         "description": "make demo: a local mail server"}, name=MAIL_DESTINATION),
        actor="make demo", via="demo")
    rule = TrustRule.objects.filter(name=HOOK_RULE).first() or TrustRule(name=HOOK_RULE)
    rule.worker, rule.destination = worker, Destination.objects.get(name=hook_destination)
    rule.kind, rule.max_per_day, rule.enabled = "webhook", 50, True
    trust_rule_save(rule, actor="make demo", via="demo")


def report_lines(run: Run, posts: int, mails: int) -> list[str]:
    lines = ["", "== what it proposed (decided and performed on the trusted side)"]
    for p in Proposal.objects.filter(run=run).select_related("destination", "trust_rule", "decided_by"):
        who = (f"earned-trust rule {p.trust_rule.name}" if p.trust_rule_id
               else p.decided_by.get_username() if p.decided_by_id else "nobody")
        outcome = (p.result or {}).get("summary", "")
        where = p.destination.name if p.destination_id else "the worker itself"
        lines.append(f"  {p.kind} -> {where}: {p.status}"
                     f" (approved by {who}){f', {outcome}' if outcome else ''}")
    lines.append(f"  delivered: {posts} webhook post(s), {mails} e-mail(s) (the box reached neither server; "
                 "the executors did)")
    return lines
