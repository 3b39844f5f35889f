"""What an approver sees of a proposal, by kind: the e-mail as it will be sent, the webhook's body, the
commits and diff summary of a push, the identity change as a diff. Everything from the box is shown as
inert text with hidden characters made visible (controlplane.vault.masking.visible); sentinels masked."""

from __future__ import annotations

import base64
import difflib
import json
import re

from controlplane.core.taint import DataClass
from controlplane.proposals.models import Proposal
from controlplane.vault.masking import known_sentinels, mask_text, visible
from controlplane.vault.redact import url_for_record

MAX_SHOWN = 20_000  # characters of any one text shown in full; the rest is cut with a note
_SUBJECT = re.compile(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*)$", re.MULTILINE)
_FROM_SHA = re.compile(r"^From ([0-9a-f]{40}) ", re.MULTILINE)


def _shown(text: str, sentinels: dict) -> str:
    text = mask_text(str(text), sentinels)
    return (
        text
        if len(text) <= MAX_SHOWN
        else text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN} more characters)"
    )


def headline(proposal: Proposal) -> str:
    payload = proposal.payload or {}
    if proposal.kind == Proposal.Kind.EMAIL:
        return visible(f"mail to {', '.join(payload.get('to', []))}: {payload.get('subject', '')}")[:200]
    if proposal.kind == Proposal.Kind.WEBHOOK:
        return f"post {len(json.dumps(payload))} bytes of JSON"
    if proposal.kind == Proposal.Kind.GIT_PUSH:
        return visible(f"push to {payload.get('branch', '')} on {payload.get('base_commit', '')[:12]}")
    if proposal.kind == Proposal.Kind.FOLLOW_UP:
        return visible(f"follow-up task: {payload.get('task', '')}")[:300]
    if proposal.kind == Proposal.Kind.MEMORY_NOTE:
        # Never the note's text: a headline is copied to places forgetting cannot reach (chat posts).
        about = payload.get("person") if payload.get("scope") == "person" else payload.get("scope", "")
        size = len(payload.get("text", ""))
        return visible(f"memory note ({payload.get('scope', '')}: {about}), {size} chars")
    if proposal.kind == Proposal.Kind.KNOWLEDGE_CHANGE:
        files = payload.get("files") or []
        return visible(f"knowledge change: {len(files)} files on {str(payload.get('base_commit', ''))[:12]}")
    return "change the worker's identity"


def in_words(proposal: Proposal, sentinels: dict | None = None) -> str:
    """What the proposal does, as a sentence an approver recognises after pressing a button ("send e-mail
    to ops@example.org through mail-relay, subject “Weekly report”"): the confirmation after a decision
    or a retry. Box-written parts are shortened, masked and shown inert; a memory note's text never
    appears (it is copied to places forgetting cannot reach)."""
    sentinels = known_sentinels() if sentinels is None else sentinels
    payload = proposal.payload or {}
    dest = f" {proposal.destination.name}" if proposal.destination_id else ""

    def quoted(text, limit=120) -> str:
        text = " ".join(mask_text(str(text), sentinels).split())
        return "“" + (text if len(text) <= limit else text[: limit - 1] + "…") + "”"

    kind = proposal.kind
    if kind == Proposal.Kind.EMAIL:
        to = mask_text(", ".join(str(a) for a in payload.get("to", [])), sentinels)[:200]
        through = f" through{dest}" if dest else ""
        words = f"send e-mail to {to}{through}, subject {quoted(payload.get('subject', ''))}"
    elif kind == Proposal.Kind.WEBHOOK:
        words = f"post {len(json.dumps(payload))} bytes of JSON to the webhook{dest}"
    elif kind == Proposal.Kind.GIT_PUSH:
        words = f"push to branch {quoted(payload.get('branch', ''), 80)} of{dest or ' the remote'}"
    elif kind == Proposal.Kind.FOLLOW_UP:
        words = f"queue the follow-up task {quoted(payload.get('task', ''))}"
    elif kind == Proposal.Kind.MEMORY_NOTE:
        scope = payload.get("scope", "")
        about = f" about {payload.get('person')}" if scope == "person" else ""
        words = f"write a {scope} memory note{about} ({len(payload.get('text', ''))} characters)"
    else:
        words = "change the worker's identity"
    return visible(words)


def _email(proposal: Proposal, sentinels: dict) -> dict:
    payload, dest = proposal.payload, proposal.destination
    attachments = [
        {
            "filename": visible(a["filename"]),
            "content_type": a["content_type"],
            "size": len(base64.b64decode(a["content_b64"])),
        }
        for a in payload.get("attachments") or []
    ]
    headers = [
        ("From", dest.from_address if dest else ""),
        ("To", ", ".join(payload["to"])),
        ("Subject", payload["subject"]),
        ("Message-ID", f"<{proposal.idempotency_key}@roster.invalid>"),
    ]
    return {
        "headers": [(name, _shown(value, sentinels)) for name, value in headers],
        "body": _shown(payload["body"], sentinels),
        "attachments": attachments,
        "relay": f"{dest.smtp_host}:{dest.smtp_port}" if dest else "",
    }


def _webhook(proposal: Proposal, sentinels: dict) -> dict:
    dest = proposal.destination
    header_names = sorted(
        {*(dest.headers or {}), "Content-Type", "Idempotency-Key"}
        | ({dest.secret_header} if dest and dest.secret_header else set())
    )
    return {
        "method": dest.method if dest else "",
        "url": url_for_record(dest.url) if dest else "",
        "header_names": header_names,
        "body": _shown(
            json.dumps(proposal.payload, indent=2, ensure_ascii=False, sort_keys=True),
            sentinels,
        ),
    }


def diff_summary(patch: str) -> list[dict]:
    """Per file: lines added and removed, read from a format-patch text."""
    files: list[dict] = []
    current = None
    for line in patch.splitlines():
        if line == "-- ":  # format-patch's signature separator: the end of this patch's diff
            current = None
        elif line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            current = {"file": visible(parts[1] if len(parts) == 2 else line[11:]), "added": 0, "removed": 0}
            files.append(current)
        elif current is not None and line.startswith("+") and not line.startswith("+++"):
            current["added"] += 1
        elif current is not None and line.startswith("-") and not line.startswith("---"):
            current["removed"] += 1
    return files


def _bundle_refs(bundle_b64: str) -> list[str]:
    header = base64.b64decode(bundle_b64)[: 64 * 1024].split(b"\n\n", 1)[0]
    return [visible(line.decode("utf-8", "replace")) for line in header.splitlines()[1:]][:50]


def _git(proposal: Proposal, sentinels: dict) -> dict:
    payload, dest = proposal.payload, proposal.destination
    shown = {
        "remote": url_for_record(dest.url) if dest else "",
        "branch": payload["branch"],
        "base_commit": payload["base_commit"],
    }
    if payload.get("patch") is not None:
        patch = payload["patch"]
        shown["commits"] = [
            {"sha": sha, "subject": _shown(subject, sentinels)}
            for sha, subject in zip(_FROM_SHA.findall(patch), _SUBJECT.findall(patch), strict=False)
        ]
        shown["files"] = diff_summary(patch)
        shown["patch"] = _shown(patch, sentinels)
    else:
        shown["bundle_refs"] = _bundle_refs(payload["bundle_b64"])
        shown["bundle_size"] = len(base64.b64decode(payload["bundle_b64"]))
    return shown


def _identity(proposal: Proposal, sentinels: dict) -> dict:
    before = proposal.worker.identity or ""
    after = proposal.payload["identity"]
    diff = difflib.unified_diff(
        before.splitlines(), after.splitlines(), "identity (now)", "identity (proposed)", lineterm=""
    )
    return {"diff": _shown("\n".join(diff) or "(no change)", sentinels)}


def _follow_up(proposal: Proposal, sentinels: dict) -> dict:
    return {"task": _shown(proposal.payload.get("task", ""), sentinels)}


def _memory_note(proposal: Proposal, sentinels: dict) -> dict:
    payload = proposal.payload
    about = {"person": f"about {payload.get('person')}", "channel": "about the channel",
             "worker": "for the worker"}.get(payload.get("scope"), "")
    return {"note": _shown(payload.get("text", ""), sentinels), "about": about}


def _knowledge_change(proposal: Proposal, sentinels: dict) -> dict:
    """Each file as it will be committed: text quoted (masked), binary by size and hash only."""
    files = []
    for entry in (proposal.payload or {}).get("files") or []:
        text = entry.get("content")
        files.append({"path": visible(entry.get("path", "")), "action": entry.get("action", ""),
                      "size": entry.get("size", 0), "sha256": entry.get("sha256", ""),
                      "text": _shown(text, sentinels) if text is not None else None})
    return {"files": files, "base_commit": (proposal.payload or {}).get("base_commit", "")}


def preview(proposal: Proposal, sentinels: dict | None = None) -> dict:
    sentinels = known_sentinels() if sentinels is None else sentinels
    build = {"email": _email, "webhook": _webhook, "git_push": _git, "identity_edit": _identity,
             "follow_up": _follow_up, "memory_note": _memory_note,
             "knowledge_change": _knowledge_change}[proposal.kind]
    return {
        "kind": proposal.kind,
        "headline": headline(proposal),
        "taint": DataClass(proposal.taint).label,
        "untrusted": proposal.untrusted,
        "seen": proposal.seen[:10],
        "seen_count": len(proposal.seen),
        "participants": proposal.participants,
        "held": proposal.held,
        "rationale": _shown(proposal.rationale, sentinels),
        **build(proposal, sentinels),
    }
