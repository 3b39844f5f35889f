"""Issue 27.4: a held request whose run has ended is closed by the sweep (no countdown, no Deny button
left on the queue, not pending on the CLI), audited as closed with why; a live run's request stays."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_expire_due
from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status
from tests.web.conftest import open_approval
from tests.web.test_approval_views import QUEUE, _login

pytestmark = pytest.mark.django_db


def test_a_request_of_an_ended_run_is_closed(approver, worker, run):
    ended = open_approval(run)
    other_run, _ = run_create(worker, command=["true"])
    live = open_approval(other_run)
    run_set_status(run.pk, Run.Status.STARTING)
    run_set_status(run.pk, Run.Status.FAILED, reason="box exited")
    assert approval_expire_due() == 1
    ended.refresh_from_db()
    live.refresh_from_db()
    assert ended.status == Approval.Status.EXPIRED and live.status == Approval.Status.PENDING
    record = json.loads(AuditRecord.objects.filter(kind="approval").order_by("-seq").first().body)["data"]
    assert record["event"] == "closed" and f"run {run.pk} ended (failed)" in record["why"]
    html = _login(approver).get(QUEUE).content.decode()
    pending = html.split("Recently decided")[0]
    assert f"run {run.pk}" not in pending.replace(f"run {other_run.pk}", "")
    out = io.StringIO()
    call_command("approval", "list", "--status", "pending", stdout=out)
    assert str(ended.pk) not in out.getvalue() and str(live.pk) in out.getvalue()
    assert approval_expire_due() == 0  # closed once
