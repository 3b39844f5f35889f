"""Auditor pages: filters, pagination, streamed CSV that matches the database, verification."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.web.models import ChainCheck
from tests.web.conftest import PASSWORD

AUDIT = reverse("web:audit")
EXPORT = reverse("web:audit-export")
VERIFY = reverse("web:audit-verify")


def _login(user, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def records(run, worker):
    audit_append("decision", {"method": "GET", "url": "https://a.example/"}, run=run, verdict="allow")
    audit_append("decision", {"method": "GET", "url": "https://b.example/"}, run=run, verdict="deny",
                 reason="no_grant")
    audit_append("tripwire", {"message": "=cmd|' /C calc'!A0"}, run=run, verdict="deny", reason="no_grant")
    audit_append("grant_change", {"grant": "x"}, worker="other-worker")
    audit_append("secret_change", {"secret": "openai"})
    return list(AuditRecord.objects.order_by("seq"))


def _seqs(html: str) -> list[int]:
    import re

    return [int(s) for s in re.findall(r'data-seq="(\d+)"', html)]


def test_auditor_browses_all_records(auditor, records):
    html = _login(auditor).get(AUDIT).content.decode()
    assert _seqs(html) == [r.seq for r in records][::-1]  # newest first by default
    assert f"{len(records)} records match" in html
    oldest = _login(auditor).get(AUDIT, {"order": "oldest"}).content.decode()
    assert _seqs(oldest) == [r.seq for r in records]


@pytest.mark.parametrize("query, expected", [
    ({"kind": "decision"}, lambda rs: [r for r in rs if r.kind == "decision"]),
    ({"verdict": "deny"}, lambda rs: [r for r in rs if r.verdict == "deny"]),
    ({"worker": "other-worker"}, lambda rs: [r for r in rs if r.worker_name == "other-worker"]),
    ({"kind": "decision", "verdict": "allow"},
     lambda rs: [r for r in rs if r.verdict == "allow" and r.kind == "decision"]),
])
def test_filters(auditor, records, query, expected):
    html = _login(auditor).get(AUDIT, query).content.decode()
    assert _seqs(html) == [r.seq for r in expected(records)][::-1]


def test_filter_by_run_and_time(auditor, records, run):
    client = _login(auditor)
    run_seqs = [r.seq for r in records if r.run_id_ref == run.pk][::-1]
    assert len(run_seqs) >= 3
    assert _seqs(client.get(AUDIT, {"run": run.pk}).content.decode()) == run_seqs
    future = (timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    past = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert _seqs(client.get(AUDIT, {"since": future}).content.decode()) == []
    window = client.get(AUDIT, {"since": past, "until": future}).content.decode()
    assert _seqs(window) == [r.seq for r in records][::-1]


def test_bad_filter_shows_an_error_and_matches_nothing(auditor, records):
    response = _login(auditor).get(AUDIT, {"run": "abc"})
    html = response.content.decode()
    assert response.status_code == 200 and _seqs(html) == [] and 'role="alert"' in html


def test_pagination(auditor, records, settings):
    settings.ROSTER_WEB_AUDIT_PAGE_SIZE = 2
    client = _login(auditor)
    seqs = [r.seq for r in records][::-1]
    pages = (len(seqs) + 1) // 2
    first = client.get(AUDIT, {"kind": ""}).content.decode()
    assert _seqs(first) == seqs[:2] and f"Page 1 of {pages}" in first and "page=2" in first
    last = client.get(AUDIT, {"page": pages}).content.decode()
    assert _seqs(last) == seqs[(pages - 1) * 2:]


def test_csv_is_streamed_and_matches_the_database(auditor, records):
    response = _login(auditor).get(EXPORT, {"verdict": "deny"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    expected = [r for r in records if r.verdict == "deny"]
    assert [int(r["seq"]) for r in rows] == [r.seq for r in expected]
    assert [r["hash"] for r in rows] == [r.hash for r in expected]
    assert [r["kind"] for r in rows] == [r.kind for r in expected]
    assert "calc" in rows[-1]["data"]


def test_csv_bad_filter_is_400(auditor, records):
    assert _login(auditor).get(EXPORT, {"run": "-1"}).status_code == 400


def test_only_exporters_download(approver, records):
    assert _login(approver).get(EXPORT).status_code == 403


def test_approver_cannot_browse_audit(approver, records):
    assert _login(approver).get(AUDIT).status_code == 403


def test_verify_records_who_and_result(auditor, records):
    client = _login(auditor, csrf=True)
    client.get(AUDIT)
    response = client.post(VERIFY, {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert response.status_code == 302
    check = ChainCheck.objects.get()
    assert check.ok and check.records_checked == len(records) and check.run_by == auditor
    html = client.get(AUDIT).content.decode()
    assert "Verified" in html and f"{len(records)} records checked" in html


def test_verify_checks_against_the_latest_signed_checkpoint(auditor, records):
    from django.core.management import call_command

    from tests.audit import tamper

    call_command("audit", "checkpoint")
    tamper.drop_triggers()
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq > 1")  # a clean cut: the chain alone is sound
    _login(auditor).post(VERIFY)
    check = ChainCheck.objects.get()
    assert not check.ok and "records were removed from the end" in check.message


def test_verify_reports_a_broken_chain(auditor, records, monkeypatch):
    from controlplane.audit import verify

    broken = verify.VerifyResult(False, 2, "record seq 3: hash mismatch", broken_seq=3)
    monkeypatch.setattr(verify, "verify_database", lambda *a, **k: broken)
    _login(auditor).post(VERIFY)
    html = _login(auditor).get(AUDIT).content.decode()
    assert "NOT verified" in html and "hash mismatch" in html


def test_verify_needs_csrf_and_post(auditor, records):
    client = _login(auditor, csrf=True)
    assert client.post(VERIFY).status_code == 403
    assert client.get(VERIFY).status_code == 405
    assert not ChainCheck.objects.exists()


def test_record_data_is_shown_escaped(auditor, run):
    audit_append("tripwire", {"url": "https://x.example/<img src=x onerror=alert(1)>"}, run=run,
                 verdict="deny", reason="no_grant")
    html = _login(auditor).get(AUDIT, {"kind": "tripwire"}).content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img src=x" not in html


def test_time_filters_keep_their_value_in_the_form(auditor, records):
    html = _login(auditor).get(AUDIT, {"since": "2026-01-02T03:04"}).content.decode()
    assert 'value="2026-01-02T03:04"' in html


def test_verify_runs_at_most_once_per_cooldown(auditor, records, monkeypatch):
    from controlplane.audit import verify

    calls = []
    real = verify.verify_database
    monkeypatch.setattr(verify, "verify_database", lambda *a, **k: calls.append(1) or real(*a, **k))
    client = _login(auditor)
    for _ in range(5):
        assert client.post(VERIFY).status_code == 302
    assert len(calls) == 1 and ChainCheck.objects.count() == 1
    assert "verified less than" in client.get(AUDIT).content.decode()


def test_verify_runs_again_after_the_cooldown(auditor, records, settings):
    settings.ROSTER_WEB_VERIFY_COOLDOWN_SECONDS = 0
    client = _login(auditor)
    client.post(VERIFY)
    client.post(VERIFY)
    assert ChainCheck.objects.count() == 2


@pytest.mark.parametrize("run_filter", ["99999999999999999999", str(2**63)])
def test_huge_run_filter_is_a_form_error_not_a_crash(auditor, records, run_filter):
    response = _login(auditor).get(AUDIT, {"run": run_filter})
    assert response.status_code == 200
    assert "less than or equal to" in response.content.decode()
    assert _login(auditor).get(EXPORT, {"run": run_filter}).status_code == 400


def test_who_column_and_verify_keeps_the_filters_and_page(auditor, records, settings):
    settings.ROSTER_WEB_AUDIT_PAGE_SIZE = 1
    client = _login(auditor, csrf=True)
    html = client.get(AUDIT, {"kind": "decision", "page": 2}).content.decode()
    assert '<th scope="col">Who</th>' in html
    assert 'name="view" value="kind=decision&amp;page=2"' in html
    response = client.post(VERIFY, {"csrfmiddlewaretoken": client.cookies["csrftoken"].value,
                                    "view": "kind=decision&page=2&next=https://evil.example/"})
    assert response.status_code == 302
    assert response["Location"] == f"{AUDIT}?kind=decision&page=2"


def test_record_summary_and_who(auditor, run, approver):
    from controlplane.approvals.services import approval_decide
    from tests.web.conftest import open_approval

    approval = open_approval(run)
    approval_decide(approval.pk, approver, False, "web", comment="too risky")
    html = _login(auditor).get(AUDIT, {"kind": "approval"}).content.decode()
    assert '<td class="who">alice-approver</td>' in html
    assert "event=decided · status=refused" in html and "comment=too risky" in html
