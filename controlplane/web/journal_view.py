"""The run journal's section of the run timeline (docs/journal.md, docs/web.md): each model turn with the
request as the upstream received it (credentials masked by the gateway) and the response it sent, and
the journal's records for that call. Bodies are shown as quoted data, each cut at PAGE_BODY_CHARS on the
page (`manage.py run journal` has every byte); the view's permission is the timeline's."""

from __future__ import annotations

from dataclasses import dataclass, field

from controlplane.fleet.models import Run
from controlplane.journal.models import JournalCall
from controlplane.journal.records import as_text, call_bytes, calls_of, run_records

PAGE_BODY_CHARS = 16 * 1024


@dataclass
class Turn:
    call: JournalCall
    request_head: str
    request_body: str
    response_head: str
    response_body: str
    cut: bool
    erased: bool
    records: list[str] = field(default_factory=list)


def _text(data: bytes) -> tuple[str, bool]:
    text = data.decode("utf-8", "replace")
    return (text[:PAGE_BODY_CHARS], True) if len(text) > PAGE_BODY_CHARS else (text, False)


def _head(first_line: str, headers: list) -> str:
    return "\n".join([first_line] + [f"{name}: {value}" for name, value in headers])


def journal_turns(run: Run) -> list[Turn]:
    turns, by_decision = [], {}
    for call in calls_of(run):
        request, response, erased = call_bytes(call)
        request_text, cut_a = _text(request)
        response_text, cut_b = _text(response)
        status = "no response" if call.status is None else str(call.status)
        turn = Turn(call, _head(f"{call.method} {call.url}", call.request_headers), request_text,
                    _head(status, call.response_headers), response_text, cut_a or cut_b, erased)
        turns.append(turn)
        by_decision[call.decision_id] = turn
    for record in run_records(run):
        turn = by_decision.get(record["decision_id"])
        if turn is not None:
            turn.records.append(as_text(record))
    return turns
