"""The run's journal, built from its stored model calls (docs/journal.md): one record per fact, in order —
`session_start` (the first call: model, API, the system text), `user_turn` and `tool_result` (what each
call's history added; a tool result with the data class and untrusted flag of what the run had fetched
by then, and whether the journal cut the body), `assistant_turn` (the response's content, reasoning and
tool calls exactly as returned), `cache_loss` (a call whose history is not the previous one's extended: a
provider's prompt cache is lost there) and `unreadable` (a body that does not parse, or was erased).
Each record names its call's decision id, so it can be followed to the audit chain."""

from __future__ import annotations

import json
from collections.abc import Iterator

from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run, RunDecision
from controlplane.journal import bodies, wire_formats
from controlplane.journal.models import JournalCall


def _canonical(item: object) -> str:
    return json.dumps(item, sort_keys=True, separators=(",", ":"))


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


class _Exposure:
    """What the run had fetched before a moment: the highest data class and whether any was untrusted,
    from its allowed decisions other than model calls (their results are what tool results carry)."""

    def __init__(self, run: Run, model_decisions: set[str]) -> None:
        self._rows = [(d.created_at, d.result_class, d.untrusted)
                      for d in RunDecision.objects.filter(run=run).order_by("created_at")
                      if d.decision_id not in model_decisions]

    def before(self, moment) -> tuple[str, bool]:
        seen = [(c, u) for at, c, u in self._rows if at <= moment]
        level = max((c for c, _u in seen), default=DataClass.PUBLIC)
        return DataClass(level).label, any(u for _c, u in seen)


def calls_of(run: Run) -> list[JournalCall]:
    return list(JournalCall.objects.filter(run_id_ref=run.pk).order_by("started_at", "id"))


def call_bytes(call: JournalCall) -> tuple[bytes, bytes, bool]:
    """(request body, response body, whether any piece was erased)."""
    hashes = list(call.request_parts) + ([call.response_sha256] if call.response_sha256 else [])
    found = bodies.read(hashes)
    request, erased_a = bodies.joined(list(call.request_parts), found)
    response, erased_b = (bodies.joined([call.response_sha256], found) if call.response_sha256
                          else (b"", False))
    return request, response, erased_a or erased_b


def run_records(run: Run) -> Iterator[dict]:
    calls = calls_of(run)
    exposure = _Exposure(run, {c.decision_id for c in calls})
    previous: list[str] | None = None
    for call in calls:
        api = wire_formats.api_of(call.url)
        request, response, erased = call_bytes(call)
        base = {"at": call.started_at.isoformat(), "decision_id": call.decision_id}
        try:
            doc = json.loads(request)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not api:
            yield {**base, "type": "unreadable", "part": "request", "truncated": call.request_truncated,
                   "erased": erased, "url": call.url}
            doc = None
        if doc is not None:
            system, items = wire_formats.conversation(api, doc)
            if previous is None:
                yield {**base, "type": "session_start", "run": run.pk, "worker": run.worker.name,
                       "api": api, "model": doc.get("model"), "system": system, "url": call.url}
            keys = [_canonical(item) for item in items]
            kept = _common_prefix(previous or [], keys)
            if previous is not None and kept < len(previous):
                yield {**base, "type": "cache_loss", "kept": kept, "previous": len(previous),
                       "now": len(keys)}
            data_class, untrusted = exposure.before(call.started_at)
            for item in items[kept:]:
                for record in wire_formats.inputs(api, item):
                    if record["type"] == "tool_result":
                        record.update(data_class=data_class, untrusted=untrusted,
                                      truncated=call.request_truncated)
                    yield {**base, **record}
            previous = keys
        yield from _answer(base, call, api, response, erased)


def _answer(base: dict, call: JournalCall, api: str, response: bytes, erased: bool) -> Iterator[dict]:
    if call.status is None:
        yield {**base, "type": "unreadable", "part": "response", "error": call.error}
        return
    turn = wire_formats.answer(api, response, call.response_streamed) if api else {}
    if not turn:
        yield {**base, "type": "unreadable", "part": "response", "status": call.status,
               "truncated": call.response_truncated, "erased": erased}
        return
    yield {**base, "type": "assistant_turn", "at": call.ended_at.isoformat(), "status": call.status,
           **turn, "truncated": call.response_truncated}


def _short(value: object, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def as_text(record: dict) -> str:
    """One record as a line (or a few) for a terminal; the JSON lines carry everything."""
    kind, at = record["type"], record["at"]
    if kind == "session_start":
        head = (f"{at} session start: run {record['run']} ({record['worker']}), "
                f"{record['api']} {record['model']}")
        return head + (f"\n    system: {_short(record['system'])}" if record.get("system") else "")
    if kind == "user_turn":
        return f"{at} {record.get('role') or 'user'}: {_short(record.get('content'))}"
    if kind == "tool_result":
        flags = f"{record['data_class']}{', untrusted' if record['untrusted'] else ''}" + (
            ", truncated" if record.get("truncated") else "")
        return f"{at} tool result {record.get('tool_call_id')} ({flags}): {_short(record.get('content'))}"
    if kind == "assistant_turn":
        lines = [f"{at} assistant ({record['status']}): {_short(record['content'])}"]
        if record["reasoning"]:
            lines.append(f"    reasoning: {_short(record['reasoning'])}")
        lines += [f"    tool call: {_short(call)}" for call in record["tool_calls"]]
        return "\n".join(lines)
    if kind == "cache_loss":
        return (f"{at} cache loss: the history kept {record['kept']} of the previous call's "
                f"{record['previous']} items")
    return f"{at} {kind}: {_short({k: v for k, v in record.items() if k not in ('type', 'at')})}"
