"""Storing journaled calls (POST /api/gateway/journal, controlplane.journal.services): byte-exact, content-
addressed (a conversation's repeated history is stored once), audited with hashes only; the call rows
refuse UPDATE and DELETE; unknown and repeated decisions are answered, not stored; the decide answer says
how much to journal and an admin's switch turns it off."""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError, connection, transaction

from controlplane.audit.models import AuditRecord
from controlplane.journal.bodies import pieces
from controlplane.journal.models import JournalBody, JournalCall
from controlplane.journal.records import call_bytes
from tests.egress.fixtures import decide_body
from tests.journal.support import JOURNAL, allowed, entry, journal_call

pytestmark = pytest.mark.django_db


def _history(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 2000}
            for i in range(n)]


def test_the_decide_answer_carries_the_bound_and_the_grants_switch_turns_it_off(gateway, token, make_grant,
                                                                                 settings):
    settings.ROSTER_JOURNAL_MAX_BODY_BYTES = 12345
    grant = make_grant()
    assert grant.journal is True  # on by default
    assert gateway.decide(decide_body(token))["journal_max_bytes"] == 12345
    type(grant).objects.filter(pk=grant.pk).update(journal=False)
    assert gateway.decide(decide_body(token))["journal_max_bytes"] == 0
    denied = gateway.decide(decide_body(token, host="elsewhere.example"))
    assert denied["verdict"] == "deny" and denied["journal_max_bytes"] == 0


def test_a_call_is_stored_byte_exactly_and_audited_with_hashes(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    request = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi \\u00e9"}], "n": 1}'
    response = b'{"choices": [{"message": {"role": "assistant", "content": "hello"}}]}'
    decision_id = journal_call(gateway, token, request, response)
    call = JournalCall.objects.get(decision_id=decision_id)
    got_request, got_response, erased = call_bytes(call)
    assert (got_request, got_response, erased) == (request, response, False)
    assert call.run_id_ref == run.pk and call.grant_slug == "openai-chat" and call.status == 200
    record = AuditRecord.objects.get(kind="journal", run_id_ref=run.pk)
    data = json.loads(record.body)["data"]
    assert data["request_sha256"] == call.request_sha256 and "hello" not in record.body


def test_repeated_history_is_stored_once(gateway, token, make_grant):
    make_grant()
    first = json.dumps({"model": "m", "messages": _history(10)}).encode()
    journal_call(gateway, token, first, b"{}")
    stored = JournalBody.objects.count()
    size = sum(b.size for b in JournalBody.objects.all())
    second = json.dumps({"model": "m", "messages": _history(12)}).encode()
    decision_id = journal_call(gateway, token, second, b"{}")
    added = sum(b.size for b in JournalBody.objects.all()) - size
    assert JournalBody.objects.count() - stored <= 4  # two new messages and a changed tail at most
    assert added < len(second) / 4
    assert call_bytes(JournalCall.objects.get(decision_id=decision_id))[0] == second


def test_a_piece_repeated_within_one_call_is_stored_once_and_joins_back(gateway, token, make_grant):
    make_grant()
    message = {"role": "user", "content": "same"}
    request = json.dumps({"model": "m", "messages": [message, message, message]}).encode()
    response = json.dumps(message).encode()  # the response's one body is also one of the request's pieces
    decision_id = journal_call(gateway, token, request, response)
    call = JournalCall.objects.get(decision_id=decision_id)
    assert call_bytes(call) == (request, response, False)
    cut = pieces(request)
    assert len(call.request_parts) == len(cut) and len(set(call.request_parts)) < len(cut)
    assert call.response_sha256 in call.request_parts
    assert JournalBody.objects.count() == len(set(call.request_parts))
    before = {b.sha256: b.last_used_at for b in JournalBody.objects.all()}
    journal_call(gateway, token, request, response)  # all stored already: only marked used again
    assert JournalBody.objects.count() == len(before)
    assert all(b.last_used_at >= before[b.sha256] for b in JournalBody.objects.all())


@pytest.mark.parametrize("body", [b"", b"not json", b'{"messages": "a string"}', b'{"input": [1, 2, 3]}',
                                  b'{"a": {"messages": [1]}, "messages": [ {"x": [1, {"y": "]"}]} , 2 ] }',
                                  b'{"messages": [1, 2', "é".encode("latin-1")])
def test_any_body_is_cut_into_pieces_that_join_to_it(body):
    assert b"".join(pieces(body)) == body


def test_unknown_and_repeated_decisions_are_answered_and_not_stored(gateway, token, make_grant):
    make_grant()
    decision_id = allowed(gateway, token)
    one = entry(decision_id, b"{}", b"{}")
    answer = gateway.post(JOURNAL, {"entries": [entry("dc_none", b"{}", None), one, one]})
    assert answer.json() == {"results": ["unknown", "ok", "already_settled"]}
    assert JournalCall.objects.count() == 1


@pytest.mark.parametrize("bad", [
    {"entries": []},
    {"entries": [{"decision_id": "d", "started": 0, "ended": 0, "request": {}}]},
    {"entries": [entry("d", b"{}", None, extra=1)]},
    {"entries": [{**entry("d", b"{}", None), "request": {**entry("d", b"{}", None)["request"],
                                                          "body_b64": "not base64!"}}]},
    {"entries": [entry("d", b"{}", None)] * 5},
])
def test_malformed_journal_posts_are_refused(gateway, bad):
    assert gateway.post(JOURNAL, bad).status_code == 422
    assert not JournalCall.objects.exists()


def test_without_the_gateways_credential_nothing_is_stored(gateway, token, make_grant):
    make_grant()
    decision_id = allowed(gateway, token)
    answer = gateway.post(JOURNAL, {"entries": [entry(decision_id, b"{}", None)]}, headers={})
    assert answer.status_code == 401 and not JournalCall.objects.exists()


@pytest.mark.parametrize("statement", ["UPDATE journal_journalcall SET status = 0",
                                       "DELETE FROM journal_journalcall"])
def test_call_rows_refuse_update_and_delete(gateway, token, make_grant, statement):
    make_grant()
    journal_call(gateway, token, b"{}", b"{}")
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert JournalCall.objects.filter(status=200).count() == 1


def test_turning_a_grants_journal_off_is_audited_as_a_grant_change(make_grant):
    from controlplane.policy.grant_services import GRANT_EDITS

    grant = make_grant()
    grant.journal = False
    assert GRANT_EDITS.save(grant, by="admin", via="admin") == "updated"
    data = json.loads(AuditRecord.objects.filter(kind="grant_change").order_by("seq").last().body)["data"]
    assert data["changed"] == ["journal"] and data["by"] == "admin"
    assert data["before"]["journal"] is True and data["after"]["journal"] is False
