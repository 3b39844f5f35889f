"""What a knowledge change may hold, checked when a run's checkout is collected and again by the executor
before it commits (the proposal's payload is the trusted side's, but a check that guards a write belongs
next to the write): paths plainly inside the repository (no `..`, no absolute path, no `.git`), regular
files only (no symlink, no device), per-file and total size limits, and no binary unless allowed
(docs/knowledge.md, docs/settings.md)."""

from __future__ import annotations

import base64
import hashlib

from django.conf import settings

MAX_PATH = 255


def path_problem(path: str) -> str:
    """Why a path cannot be in the repository, or ""."""
    if not isinstance(path, str) or not path:
        return "an empty path"
    if len(path) > MAX_PATH:
        return f"a path longer than {MAX_PATH} characters"
    if "\0" in path or "\\" in path or any(ord(c) < 32 for c in path):
        return "a path with a control character or backslash"
    if path.startswith("/"):
        return "an absolute path"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "a path with an empty, '.' or '..' part"
    if any(p.lower() == ".git" for p in parts):
        return "a path inside .git"
    return ""


def is_binary(data: bytes) -> bool:
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def encoded(path: str, action: str, data: bytes | None) -> dict:
    """One file of a change's payload: its text (or base64 when binary) and SHA-256; a deletion has none."""
    if data is None:
        return {"path": path, "action": action}
    entry = {"path": path, "action": action, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if is_binary(data):
        entry["content_b64"] = base64.b64encode(data).decode()
    else:
        entry["content"] = data.decode("utf-8")
    return entry


def decoded(entry: dict) -> bytes | None:
    if entry.get("action") == "delete":
        return None
    if "content_b64" in entry:
        return base64.b64decode(entry["content_b64"], validate=True)
    return str(entry.get("content", "")).encode("utf-8")


def change_problems(files: list[dict]) -> list[str]:
    """Every reason this change is refused (empty: it may be proposed or committed)."""
    problems = []
    if len(files) > settings.ROSTER_KNOWLEDGE_CHANGE_MAX_FILES:
        problems.append(f"{len(files)} files changed; at most {settings.ROSTER_KNOWLEDGE_CHANGE_MAX_FILES}")
    total, seen = 0, set()
    for entry in files:
        path = entry.get("path", "")
        why = path_problem(path)
        if why:
            problems.append(f"{path!r}: {why}")
            continue
        if path in seen:
            problems.append(f"{path!r}: named twice")
        seen.add(path)
        if entry.get("action") not in ("add", "change", "delete"):
            problems.append(f"{path!r}: unknown action")
            continue
        try:
            data = decoded(entry)
        except ValueError:
            problems.append(f"{path!r}: content is not valid base64")
            continue
        if data is None:
            continue
        total += len(data)
        if len(data) > settings.ROSTER_KNOWLEDGE_FILE_MAX_BYTES:
            problems.append(f"{path!r}: {len(data)} bytes; a file is at most "
                            f"{settings.ROSTER_KNOWLEDGE_FILE_MAX_BYTES}")
        if is_binary(data) and not settings.ROSTER_KNOWLEDGE_ALLOW_BINARY:
            problems.append(f"{path!r}: binary content (ROSTER_KNOWLEDGE_ALLOW_BINARY is off)")
        if entry.get("sha256") and entry["sha256"] != hashlib.sha256(data).hexdigest():
            problems.append(f"{path!r}: content does not match its SHA-256")
    if total > settings.ROSTER_KNOWLEDGE_CHANGE_MAX_BYTES:
        problems.append(f"{total} bytes in all; a change is at most "
                        f"{settings.ROSTER_KNOWLEDGE_CHANGE_MAX_BYTES}")
    return problems
