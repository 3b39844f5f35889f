"""An auditor browses, verifies and downloads the audit log; the CSV matches the database."""

from __future__ import annotations

import csv
import io

import pytest

from controlplane.audit.models import AuditRecord
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def test_auditor_downloads_csv_matching_the_database(world, page_for):
    carol = page_for(world["carol"], "/audit/")
    assert carol.get_by_role("heading", name="Audit log").is_visible()
    carol.get_by_role("button", name="Run verify now").click()
    carol.wait_for_selector("#chain-status.ok")
    assert "Verified" in carol.inner_text("#chain-status")
    carol.get_by_label("Run id").fill(str(world["run"].pk))
    carol.get_by_role("button", name="Filter").click()
    harness.shot(carol, "10-audit-filtered")
    with carol.expect_download() as info:
        carol.locator("#export-csv").click()
    download = info.value
    text = open(download.path(), encoding="utf-8").read()
    rows = list(csv.DictReader(io.StringIO(text)))
    expected = list(AuditRecord.objects.filter(run_id_ref=world["run"].pk).order_by("seq"))
    assert len(rows) == len(expected) > 0
    got = [(int(r["seq"]), r["kind"], r["hash"]) for r in rows]
    assert got == [(e.seq, e.kind, e.hash) for e in expected]
    # nothing from another scope leaked into the filtered export
    assert {r["run"] for r in rows} == {str(world["run"].pk)}
