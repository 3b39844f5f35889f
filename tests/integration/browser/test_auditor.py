"""An auditor browses, verifies and downloads the audit log; the CSV matches the database."""

from __future__ import annotations

import csv
import io
import threading
import time

import pytest

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.audit.models import AuditRecord
from controlplane.fleet.services import run_create
from tests.integration.browser import harness
from tests.integration.browser.conftest import hold

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _activity(world) -> None:
    """A request held, approved by an approver and carried out, plus another run's records."""
    request = hold(world, body=b"audit me")
    deadline = time.monotonic() + 20
    while not Approval.objects.filter(run=world["run"], status="pending").exists():
        assert time.monotonic() < deadline, "the held request never opened an approval"
        time.sleep(0.05)
    approval_id = Approval.objects.get(run=world["run"]).pk
    # In its own thread: this one runs Playwright's event loop, where the broadcast can't block.
    decider = threading.Thread(target=approval_decide, args=(approval_id, world["bob"], True, "cli"))
    decider.start()
    decider.join(20)
    assert request.result().status_code == 200
    run_create(world["worker"], command=["other"])


def test_auditor_downloads_csv_matching_the_database(world, page_for):
    _activity(world)
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
    assert {"run_state", "approval", "decision", "spend"} <= {r["kind"] for r in rows}
    assert AuditRecord.objects.exclude(run_id_ref=world["run"].pk).exists()
    got = [(int(r["seq"]), r["kind"], r["hash"]) for r in rows]
    assert got == [(e.seq, e.kind, e.hash) for e in expected]
    # nothing from another scope leaked into the filtered export
    assert {r["run"] for r in rows} == {str(world["run"].pk)}


def test_audit_list_newest_first_with_who_and_filters_kept_across_verify(world, page_for, settings):
    _activity(world)
    carol = page_for(world["carol"], "/audit/")
    seqs = [int(s) for s in carol.eval_on_selector_all("table.audit tbody tr[data-seq]",
                                                       "rows => rows.map(r => r.dataset.seq)")]
    assert seqs == sorted(seqs, reverse=True) and len(seqs) > 3  # newest first
    carol.select_option("#id_kind", "approval")
    carol.get_by_role("button", name="Filter").click()
    carol.wait_for_url(lambda url: "kind=approval" in url)
    assert "bob" in carol.locator("table.audit td.who").all_inner_texts()
    carol.get_by_role("button", name="Run verify now").click()
    carol.wait_for_selector("#chain-status")
    assert "kind=approval" in carol.url  # the filter survived verify
    assert carol.locator("#id_kind").input_value() == "approval"
    carol.locator("table.audit td.data summary").first.click()
    assert carol.locator("table.audit pre.record-data").first.is_visible()
    harness.shot(carol, "26-audit-newest-first-who-expanded")
