"""Issue 27.9, the auditor: the CSV carries the page's "Who" column (the same person for the same record),
and a time range whose "From" is after its "Until" is an error on the page, the CSV and the CLI, never
"0 records"."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import CommandError, call_command

from controlplane.approvals.services import approval_decide
from controlplane.audit.services import audit_append
from tests.web.conftest import open_approval
from tests.web.test_audit_pages import AUDIT, EXPORT, _login

BACKWARDS = {"since": "2026-12-02T10:00", "until": "2026-12-01T10:00"}


def _csv(client, query=None) -> list[dict]:
    response = client.get(EXPORT, query or {})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_csv_has_the_pages_who_column(auditor, approver, run):
    audit_append("decision", {"method": "GET", "url": "https://a.example/"}, run=run, verdict="allow")
    approval_decide(open_approval(run).pk, approver, approve=True, channel="web")
    audit_append("grant_change", {"grant": "x", "by": "dave-admin"}, worker="alpha")
    client = _login(auditor)
    rows = _csv(client)
    assert "who" in rows[0]
    by_seq = {int(r["seq"]): r["who"] for r in rows}
    html = client.get(AUDIT, {"order": "oldest"}).content.decode()
    for seq, who in by_seq.items():
        row = html[html.index(f'data-seq="{seq}"'):]
        start = row.index('class="who">') + len('class="who">')
        cell = row[start:row.index("</td>", start)]
        assert cell == (who or "—"), (seq, who, cell)
    assert "alice-approver" in by_seq.values() and "dave-admin" in by_seq.values()
    assert "" in by_seq.values()  # a box's decision names nobody


def test_from_after_until_is_an_error_on_the_page(auditor, run):
    audit_append("decision", {"method": "GET", "url": "https://a.example/"}, run=run, verdict="allow")
    html = _login(auditor).get(AUDIT, BACKWARDS).content.decode()
    assert "“Until” is before “From”" in html and 'id="filter-invalid"' in html
    assert "0 records match" not in html and 'id="export-csv"' not in html


def test_from_after_until_is_refused_by_the_csv_and_the_cli(auditor, run):
    response = _login(auditor).get(EXPORT, BACKWARDS)
    assert response.status_code == 400 and "Until" in response.content.decode()
    with pytest.raises(CommandError, match="--since is after --until"):
        call_command("audit", "export", "--since", "2026-12-02", "--until", "2026-12-01",
                     stdout=io.StringIO())


def test_equal_from_and_until_is_a_valid_instant(auditor, run):
    instant = {"since": "2026-12-01T10:00", "until": "2026-12-01T10:00"}
    html = _login(auditor).get(AUDIT, instant).content.decode()
    assert 'id="filter-invalid"' not in html and "0 records match" in html
