"""Issue 24.4, the answer sheet: one page and one export per run — what it saw (task, the turns it was
given, recalled notes with provenance, fetched URLs with their response digests), what it asked for
(requests and verdicts, held requests and who approved them, proposals), what it cost per model — each
fact naming its audit record; the timeline's permission, and no secret value anywhere on it."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from controlplane.approvals.services import approval_decide
from controlplane.audit.models import AuditRecord
from controlplane.conversations.models import Channel, ChatServer
from controlplane.conversations.services import Inbound, message_give_to_run, message_store
from controlplane.dispatch.runinput import conversation_of, run_input_assemble
from controlplane.fleet.models import Run
from controlplane.ledger.models import ModelPrice
from controlplane.memory.services import note_write
from controlplane.vault.services import secret_set
from tests.egress.fixtures import decide_body, gateway, live_run, make_grant, secret, vault_key  # noqa: F401
from tests.web.conftest import PASSWORD, open_approval

BODY = b'{"id":"chatcmpl-1","choices":[{"message":{"content":"hi"}}]}'


def _login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def _a_run_with_everything(worker, run, token, gateway, make_grant, approver, secret):  # noqa: F811
    """A run given a chat turn and a note, that fetched once (with a model call and its digest), was
    denied once, had a held request approved and proposed something."""
    server = ChatServer.objects.create(name="hs", homeserver_url="http://127.0.0.1:1", bot_user_id="@bot:x",
                                       access_token=secret_set("bot-token", "syt_bot_value_0123456789"))
    channel = Channel.objects.create(name="ops-room", kind="matrix", worker=worker, server=server,
                                     room_id="!ops:roster.test")
    message, _ = message_store(channel, Inbound(external_id="$e1", speaker_id="@ana:roster.test",
                                                speaker_name="Ana", sent_at=datetime(2026, 12, 1, tzinfo=UTC),
                                                text="Please check the status page."))
    message_give_to_run(message, run, joined=False)
    note = note_write(worker, "worker", "Status lives at status.example.", untrusted=False)
    Run.objects.filter(pk=run.pk).update(task="Check the status.")
    run.refresh_from_db()
    run_input_assemble(run, conversation_of(run))
    ModelPrice.objects.create(pattern="gpt-4o*", input_micro_per_million=2_500_000,
                              cached_input_micro_per_million=1_250_000, output_micro_per_million=10_000_000,
                              max_output_tokens=1000)
    make_grant(secret=secret, inject_header="authorization", inject_format="Bearer {secret}")
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50})
    allowed = gateway.decide(decide_body(token, body_preview=body, body_size=len(body),
                                         body_sha256=hashlib.sha256(body.encode()).hexdigest(),
                                         model_call={"api": "chat", "model": "gpt-4o", "stream": False,
                                                     "max_output_tokens": 50, "choices": 1,
                                                     "input_estimate": 10}))
    assert allowed["verdict"] == "allow", allowed
    digest = hashlib.sha256(BODY).hexdigest()
    assert gateway.post("/api/gateway/outcome", {
        "decision_id": allowed["decision_id"], "status": 200, "request_bytes": len(body),
        "response_bytes": len(BODY), "error": "", "scrubbed": 0, "response_sha256": digest,
        "usage": {"known": True, "model": "gpt-4o-2024-08-06", "input": 12, "cached_input": 0, "output": 3,
                  "reasoning": 0, "problem": ""}}).status_code == 200
    denied = gateway.decide(decide_body(token, host="evil.example", path="/x"))
    assert denied["verdict"] == "deny"
    approval_decide(open_approval(run).pk, approver, approve=True, channel="web")
    return {"note": note, "message": message, "allowed": allowed, "digest": digest, "denied": denied}


@pytest.fixture
def everything(worker, live_run, gateway, make_grant, approver, secret):  # noqa: F811
    run, token = live_run
    facts = _a_run_with_everything(worker, run, token, gateway, make_grant, approver, secret)
    return run, facts


def _seq(kind: str, run, **data) -> int:
    for record in AuditRecord.objects.filter(kind=kind).order_by("seq"):
        body = json.loads(record.body)["data"]
        if all(body.get(k) == v for k, v in data.items()) and (record.run_id_ref in (run.pk, None)):
            return record.seq
    raise AssertionError(f"no {kind} record with {data}")


def test_the_page_shows_each_fact_linked_to_its_audit_record(approver, everything):
    run, facts = everything
    html = _login(approver).get(reverse("web:run-answers", args=[run.pk])).content.decode()
    audit = reverse("web:audit")
    assert "Check the status." in html and "Please check the status page." in html
    assert f'href="{audit}?seq={_seq("message", run, event="received", message=facts["message"].pk)}"' in html
    assert f"note {facts['note'].pk}" in html and facts["note"].provenance in html
    assert f'href="{audit}?seq={_seq("run_input", run)}"' in html
    assert facts["digest"] in html
    assert f'href="{audit}?seq={_seq("decision", run, decision_id=facts["allowed"]["decision_id"])}"' in html
    assert f'href="{audit}?seq={_seq("decision", run, decision_id=facts["denied"]["decision_id"])}"' in html
    assert "no_grant" in html and "alice-approver" in html
    assert f'href="{audit}?seq={_seq("approval", run, event="decided")}"' in html
    assert "gpt-4o-2024-08-06" in html
    assert "real-openai-key" not in html and "syt_bot_value" not in html


def test_the_timeline_links_to_it(approver, everything):
    run, _ = everything
    html = _login(approver).get(reverse("web:run", args=[run.pk])).content.decode()
    assert f'href="{reverse("web:run-answers", args=[run.pk])}"' in html


def test_a_linked_record_is_that_one_record_on_the_audit_page(auditor, everything):
    run, facts = everything
    seq = _seq("decision", run, decision_id=facts["allowed"]["decision_id"])
    html = _login(auditor).get(reverse("web:audit"), {"seq": seq}).content.decode()
    assert f'data-seq="{seq}"' in html and html.count("data-seq=") == 1


def test_the_download_and_the_cli_give_the_same_facts(approver, everything):
    run, facts = everything
    client = _login(approver)
    url = reverse("web:run-answers", args=[run.pk])
    page_json = client.get(url, {"format": "json"})
    assert page_json["Content-Disposition"] == f'attachment; filename="run-{run.pk}-answers.json"'
    sheet = json.loads(page_json.content)
    out = io.StringIO()
    call_command("run", "answer-sheet", str(run.pk), "--format", "json", stdout=out)
    assert json.loads(out.getvalue()) == sheet
    [fetched] = sheet["saw"]["fetched"]
    assert fetched["response_sha256"] == facts["digest"] and fetched["status"] == 200
    assert fetched["settle_audit"] == _seq("spend", run, op="settle")
    assert [n["note"] for n in sheet["saw"]["notes"]] == [facts["note"].pk]
    [model] = sheet["cost"]["models"]
    assert (model["model"], model["calls"], model["tokens"], model["input"], model["output"]) == (
        "gpt-4o-2024-08-06", 1, 15, 12, 3)
    decided = [a for a in sheet["asked"]["approvals"] if a["event"] == "decided"]
    assert decided[0]["by"] == "alice-approver" and decided[0]["status"] == "approved"
    rows = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).content.decode())))
    out = io.StringIO()
    call_command("run", "answer-sheet", str(run.pk), "--format", "csv", stdout=out)
    assert list(csv.DictReader(io.StringIO(out.getvalue()))) == rows
    assert {r["section"] for r in rows} == {"saw", "asked", "cost"}
    assert all(r["audit_seq"] for r in rows if not r["item"].startswith("total "))
    assert any(facts["digest"] in r["detail"] for r in rows)


def test_a_csv_cell_a_spreadsheet_would_evaluate_is_text(approver, worker, run):
    Run.objects.filter(pk=run.pk).update(task="=HYPERLINK(\"http://x\")")
    rows = list(csv.reader(io.StringIO(_login(approver).get(
        reverse("web:run-answers", args=[run.pk]), {"format": "csv"}).content.decode())))
    assert rows[1][2].startswith("'=")


def test_the_timelines_permission_and_nothing_less(nobody, run):
    url = reverse("web:run-answers", args=[run.pk])
    assert Client().get(url).status_code == 302  # to the login
    assert _login(nobody).get(url).status_code == 403
    assert _login(nobody).get(url, {"format": "json"}).status_code == 403


def test_an_unknown_format_or_run_is_refused(approver, run):
    client = _login(approver)
    assert client.get(reverse("web:run-answers", args=[run.pk]), {"format": "xml"}).status_code == 400
    assert client.get(reverse("web:run-answers", args=[run.pk + 1000])).status_code == 404


def test_an_empty_run_has_an_empty_sheet(approver, run):
    html = _login(approver).get(reverse("web:run-answers", args=[run.pk])).content.decode()
    assert "No conversation was given to this run." in html and "It made no request." in html
