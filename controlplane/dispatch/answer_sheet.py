"""A run's answer sheet (docs/audit.md, "The answer sheet"; issue 24.4): what it saw, what it asked for,
what it cost and who approved it, one fact per line, each naming the audit record it stands on (`audit`:
the record's seq). Built from the run's audit records, with the rows they name for what a record keeps
only as a digest (a turn's text, a note's provenance): nothing here is a new fact, so the sheet is as
trustworthy as the chain `audit verify` checks. The web page and `manage.py run answer-sheet` both read
this; the CSV is the same facts, one row each.

Read only. Credentials never appear: URLs are recorded masked (controlplane.vault.redact) and any
sentinel is masked again here, as the timeline does."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import timedelta

from django.db.models import Sum

from controlplane.audit.export import neutralise
from controlplane.audit.models import AuditRecord
from controlplane.conversations.models import Message
from controlplane.conversations.selectors import input_origin
from controlplane.fleet.models import Run, RunDecision
from controlplane.ledger.models import SpendLine
from controlplane.memory.models import Note
from controlplane.vault.masking import known_sentinels, mask_text

CSV_HEADER = ["section", "item", "what", "verdict", "who", "detail", "audit_seq"]


def _data(record: AuditRecord) -> dict:
    try:
        body = json.loads(record.body)
    except ValueError:
        return {}
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, dict) else {}

RECEIVED_MARGIN = timedelta(seconds=60)


def _turns(run: Run, sentinels: dict[str, str]) -> list[dict]:
    """The messages given to the run (its input origin's), each with its `received` record. The input
    itself carries the channel's recent history up to them (controlplane.conversations.selectors); the
    sheet lists what was given to this run, which is what the `message` records tie to it."""
    given = list(Message.objects.filter(run=input_origin(run), direction=Message.Direction.INBOUND)
                 .select_related("channel__worker").order_by("id"))
    if not given:
        return []
    seqs: dict[int, int] = {}
    # Each message's `received` record is appended in the message's own transaction, so none is older
    # than the first message by more than that transaction: the record's time and the row's are two
    # clock readings in it, and either may come first (the margin only bounds the scan).
    received = AuditRecord.objects.filter(kind="message", worker_name=given[0].channel.worker.name
                                          if given[0].channel.worker_id else "",
                                          created_at__gte=given[0].created_at - RECEIVED_MARGIN)
    for record in received.order_by("seq"):
        data = _data(record)
        if data.get("event") == "received" and isinstance(data.get("message"), int):
            seqs.setdefault(data["message"], record.seq)
    return [{"message": m.pk, "channel": m.channel.name, "speaker": m.speaker_id,
             "name": m.speaker_name or m.speaker_id, "role": m.role, "time": m.sent_at.isoformat(),
             "text": mask_text(m.text, sentinels), "truncated": m.text_truncated, "audit": seqs.get(m.pk)}
            for m in given]


def _notes(note_ids: list[int], seq: int | None) -> list[dict]:
    notes = {n.pk: n for n in Note.objects.filter(pk__in=note_ids)}
    out = []
    for note_id in note_ids:
        note = notes.get(note_id)
        out.append({"note": note_id, "scope": note.scope_label if note else "",
                    "provenance": note.provenance if note else "(no such note)",
                    "forgotten": bool(note and note.forgotten_at), "audit": seq})
    return out


def _model_costs(settles: list[tuple[int, dict]]) -> list[dict]:
    """Per model, from the settle records of model calls: calls, token counts, tokens and money settled
    (a flagged call counts at its reserved worst case, as the ledger settled it)."""
    models: dict[str, dict] = {}
    for seq, data in settles:
        model = data.get("model")
        if not isinstance(model, dict):
            continue
        name = str(model.get("reported_model") or model.get("model") or "(unknown)")
        row = models.setdefault(name, {"model": name, "calls": 0, "input": 0, "cached_input": 0,
                                       "output": 0, "tokens": 0, "micro": 0, "flagged": 0, "audit": []})
        row["calls"] += 1
        for key in ("input", "cached_input", "output", "tokens", "micro"):
            value = model.get(key)
            row[key] += value if isinstance(value, int) else 0
        row["flagged"] += 1 if model.get("flagged") else 0
        row["audit"].append(seq)
    return sorted(models.values(), key=lambda r: r["model"])


def answer_sheet(run: Run) -> dict:
    """The run's answer sheet as plain data (JSON-ready)."""
    sentinels = known_sentinels()
    records = list(AuditRecord.objects.filter(run_id_ref=run.pk).order_by("seq"))
    digests = dict(RunDecision.objects.filter(run=run).values_list("decision_id", "response_sha256"))
    statuses = dict(RunDecision.objects.filter(run=run).values_list("decision_id", "outcome_status"))
    run_input_seq, note_ids = None, []
    requests, approvals, proposals, settles = [], [], [], []
    settled: dict[str, tuple[int, dict]] = {}
    for record in records:
        data = _data(record)
        if record.kind == "run_input" and run_input_seq is None:
            run_input_seq = record.seq
            note_ids = [n for n in data.get("notes") or [] if isinstance(n, int)]
        elif record.kind == "decision":
            requests.append({"decision_id": str(data.get("decision_id", "")),
                             "method": data.get("method", ""),
                             "url": mask_text(str(data.get("url", "")), sentinels),
                             "verdict": record.verdict, "reason": record.reason,
                             "grant": data.get("grant") or "", "approval": data.get("approval"),
                             "audit": record.seq})
        elif record.kind in ("approval", "chat_approval"):
            approvals.append({"approval": data.get("approval") or data.get("proposal") or "",
                              "event": data.get("event", ""), "status": data.get("status") or record.verdict,
                              "by": str(data.get("by") or data.get("sender") or ""),
                              "channel": str(data.get("channel") or ""),
                              "url": mask_text(str(data.get("url", "")), sentinels), "kind": record.kind,
                              "audit": record.seq})
        elif record.kind == "proposal":
            proposals.append({"proposal": data.get("proposal", ""), "event": data.get("event", ""),
                              "kind": data.get("kind", ""), "destination": data.get("destination") or "",
                              "status": record.verdict, "reason": record.reason,
                              "by": str(data.get("by") or ""), "channel": str(data.get("channel") or ""),
                              "audit": record.seq})
        elif record.kind == "spend" and data.get("op") == "settle":
            settles.append((record.seq, data))
            settled[str(data.get("decision_id", ""))] = (record.seq, data)
    fetched = []
    for request in requests:
        if request["verdict"] != "allow":
            continue
        seq, data = settled.get(request["decision_id"], (None, {}))
        fetched.append({"decision_id": request["decision_id"], "method": request["method"],
                        "url": request["url"], "status": statuses.get(request["decision_id"]),
                        "response_bytes": data.get("response_bytes"),
                        "response_sha256": data.get("response_sha256") or digests.get(request["decision_id"])
                        or "", "audit": request["audit"], "settle_audit": seq})
    totals = {unit: int(total or 0) for unit, total in SpendLine.objects.filter(run=run).values_list("unit")
              .annotate(total=Sum("amount")).order_by()}
    return {
        "run": run.pk, "worker": run.worker.name, "status": run.status,
        "saw": {"task": {"text": mask_text(run.task, sentinels), "input_sha256": run.input_sha256,
                         "carries_conversation": run.carries_conversation,
                         "participants": list(run.participants or []), "audit": run_input_seq},
                "conversation": _turns(run, sentinels), "notes": _notes(note_ids, run_input_seq),
                "fetched": fetched},
        "asked": {"requests": requests, "approvals": approvals, "proposals": proposals},
        "cost": {"totals": totals, "models": _model_costs(settles)},
    }


def _rows(sheet: dict) -> Iterable[list]:
    saw, asked, cost = sheet["saw"], sheet["asked"], sheet["cost"]
    task = saw["task"]
    yield ["saw", "task", task["text"], "", "", f"input sha256 {task['input_sha256']}", task["audit"]]
    for t in saw["conversation"]:
        yield ["saw", f"turn {t['message']}", t["text"], "", f"{t['name']} ({t['speaker']}, {t['role']})",
               f"channel {t['channel']} at {t['time']}", t["audit"]]
    for n in saw["notes"]:
        yield ["saw", f"note {n['note']}", n["provenance"], "forgotten" if n["forgotten"] else "", "",
               n["scope"], n["audit"]]
    for f in saw["fetched"]:
        yield ["saw", f"fetched {f['decision_id']}", f"{f['method']} {f['url']}", str(f["status"] or ""), "",
               f"response sha256 {f['response_sha256'] or '(not reported)'}", f["audit"]]
    for r in asked["requests"]:
        yield ["asked", f"request {r['decision_id']}", f"{r['method']} {r['url']}", r["verdict"], "",
               r["reason"] or r["grant"], r["audit"]]
    for a in asked["approvals"]:
        yield ["asked", f"{a['kind']} {a['approval']}", a["event"], a["status"], a["by"], a["channel"],
               a["audit"]]
    for p in asked["proposals"]:
        yield ["asked", f"proposal {p['proposal']}", f"{p['event']} {p['kind']} {p['destination']}".strip(),
               p["status"], p["by"], p["reason"] or p["channel"], p["audit"]]
    for m in cost["models"]:
        yield ["cost", f"model {m['model']}", f"{m['calls']} calls, {m['tokens']} tokens, {m['micro']} micro",
               "", "", f"input {m['input']} (cached {m['cached_input']}), output {m['output']}, "
               f"flagged {m['flagged']}", " ".join(str(s) for s in m["audit"])]
    for unit, amount in sorted(cost["totals"].items()):
        yield ["cost", f"total {unit}", str(amount), "", "", "spend ledger", ""]


def answer_sheet_csv(sheet: dict) -> str:
    """The same facts, one row each; a cell a spreadsheet would evaluate is quoted as text."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for row in _rows(sheet):
        writer.writerow([neutralise("" if v is None else str(v)) for v in row])
    return out.getvalue()
