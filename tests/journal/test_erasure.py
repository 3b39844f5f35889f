"""Erasing journal bodies (controlplane.journal.services): retention erases the bytes of bodies no call
has named for ROSTER_JOURNAL_RETENTION_DAYS (a history still in use stays), forgetting a note cuts its
text from every body that holds it (plain or JSON-escaped); the call rows and hashes stay and each
erasure is audited with the hashes only."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.journal.models import JournalBody, JournalCall
from controlplane.journal.records import call_bytes
from controlplane.journal.services import purge_expired
from controlplane.journal.tasks import purge_expired_journal
from controlplane.memory.services import note_forget, note_write
from tests.journal import shapes as s
from tests.journal.support import journal_call

pytestmark = pytest.mark.django_db
FACT = "Ana's door code is 4417 \u2014 \"do not share\""


def _journal_records(action: str) -> list[dict]:
    found = [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(kind="journal")]
    return [d for d in found if d["action"] == action]


def test_retention_erases_unused_bodies_and_keeps_hashes_and_rows(gateway, token, make_grant, settings):
    settings.ROSTER_JOURNAL_RETENTION_DAYS = 90
    make_grant()
    old = journal_call(gateway, token, s.chat_request(s.CHAT_USER), s.chat_json(content="old answer"))
    JournalBody.objects.update(last_used_at=timezone.now() - timedelta(days=91))
    # A later call repeats the user message: that body is in use again and stays.
    journal_call(gateway, token, s.chat_request(s.CHAT_USER, {"role": "user", "content": "more"}),
                 s.chat_json(content="new answer"))
    erased = purge_expired_journal()
    assert erased > 0
    call = JournalCall.objects.get(decision_id=old)
    request, response, was_erased = call_bytes(call)
    assert was_erased and response == b"" and b"Weather in Paris?" in request
    assert JournalBody.objects.filter(sha256=call.response_sha256, erased_at__isnull=False).exists()
    [record] = _journal_records("retention")
    assert record["bodies"] == erased and call.response_sha256 in record["sha256"] and record["days"] == 90
    assert purge_expired() == 0  # nothing twice


def test_retention_zero_keeps_everything(gateway, token, make_grant, settings):
    settings.ROSTER_JOURNAL_RETENTION_DAYS = 0
    make_grant()
    journal_call(gateway, token, s.chat_request(s.CHAT_USER), s.chat_json(content="x"))
    JournalBody.objects.update(last_used_at=timezone.now() - timedelta(days=10_000))
    assert purge_expired() == 0 and not JournalBody.objects.filter(erased_at__isnull=False).exists()


def test_a_forgotten_notes_text_is_cut_from_the_journal(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    note = note_write(run.worker, "worker", FACT)
    # The note reached the model in the run's input (JSON-escaped), and the model quoted it back.
    journal_call(gateway, token, s.chat_request({"role": "user", "content": f"Notes: {FACT}"}),
                 s.chat_json(content=f"Noted: {FACT}"))
    call = JournalCall.objects.get()
    before = call.request_sha256
    note_forget(note.pk, by="admin", reason="subject request")
    request, response, erased = call_bytes(call)
    escaped = json.dumps(FACT)[1:-1].encode()
    assert erased and escaped not in request and escaped not in response and b"4417" not in request
    assert b"[erased]" in request and b"[erased]" in response
    call.refresh_from_db()
    assert call.request_sha256 == before  # what it was stays on the record
    [record] = _journal_records("text_erased")
    assert record["bodies"] == 2 and "4417" not in json.dumps(record)
    assert "4417" not in "".join(AuditRecord.objects.values_list("body", flat=True))


def test_forgetting_a_text_no_body_holds_changes_nothing(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    journal_call(gateway, token, s.chat_request(s.CHAT_USER), s.chat_json(content="x"))
    note = note_write(run.worker, "worker", "a fact never sent to a model")
    note_forget(note.pk, by="admin")
    assert not JournalBody.objects.filter(erased_at__isnull=False).exists()
    assert _journal_records("text_erased") == []
