"""Executors: perform one approved proposal with the destination's real credential, on the trusted side.
Each returns an Outcome; the task (controlplane.proposals.tasks) records it. The credential is handed to
the library call only; every text kept from the remote's answer has it removed first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from controlplane.vault.services import secret_reveal


@dataclass(frozen=True)
class Outcome:
    ok: bool
    transient: bool  # worth another attempt (server down, timeout, "try later")
    summary: str  # one line, e.g. "HTTP 200" or "SMTP 250"
    detail: str = ""  # the start of the remote's answer

    def as_record(self, credential: str | None) -> dict:
        limit = settings.ROSTER_EXECUTOR_ANSWER_CHARS
        return {
            "ok": self.ok,
            "transient": self.transient,
            "summary": scrub(self.summary, credential)[:200],
            "detail": scrub(self.detail, credential)[:limit],
        }


def scrub(text: str, credential: str | None) -> str:
    text = str(text)
    if credential:
        text = text.replace(credential, "[credential]")
    return text


def credential_of(destination) -> str | None:
    return secret_reveal(destination.secret) if destination is not None and destination.secret_id else None


# Executors other apps add (a lower app never imports a higher one): dispatch registers `follow_up` from
# its AppConfig.ready(); memory and knowledge will register theirs the same way.
EXECUTORS: dict[str, Callable[[object, str | None], Outcome]] = {}


def register_executor(kind: str, runner: Callable[[object, str | None], Outcome]) -> None:
    EXECUTORS[kind] = runner


def perform(proposal, credential: str | None) -> Outcome:
    from controlplane.proposals.executors import git, identity, mail, webhook

    runner = {
        "webhook": webhook.send,
        "email": mail.send,
        "git_push": git.push,
        "identity_edit": identity.apply,
        **EXECUTORS,
    }.get(proposal.kind)
    if runner is None:  # no executor for this kind in this process: nothing happens (invariant 5)
        return Outcome(ok=False, transient=False, summary=f"no executor for {proposal.kind}")
    return runner(proposal, credential)
