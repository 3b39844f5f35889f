"""From inside a real box, with the real gateway, control plane and Celery worker: the destinations'
hosts are unreachable directly and through the gateway; a webhook proposal let through by an earned-trust
rule and an e-mail approved by a person while the box waits are delivered once each to real servers; the
box polls both to `executed`; forged run identities in headers and body never count."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from controlplane.dispatch.starting import run_start
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create
from controlplane.proposals import services
from controlplane.proposals.models import Proposal, TrustRule
from controlplane.proposals.services import destination_save, trust_rule_save
from controlplane.proposals.validation import validate_destination
from tests.integration.boxes.conftest import wait_for_run
from tests.proposals.servers import smtp_server, webhook_server

pytestmark = [pytest.mark.integration, pytest.mark.docker]
PROBE = Path(__file__).with_name("propose_probe.py")


def _approver():
    from django.contrib.auth.models import Group, User

    from controlplane.core.roles import APPROVERS, ensure_roles

    ensure_roles()
    user = User.objects.create_user("box-approver")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return User.objects.get(pk=user.pk)


def test_box_proposes_and_the_trusted_side_delivers(queued_stack):
    site = queued_stack.site
    worker = worker_create("proposer")
    other_worker = worker_create("bystander")
    other_run, _ = run_create(other_worker, command=["true"])
    approver = _approver()
    with (
        webhook_server(host="0.0.0.0") as (hook_port, receiver),
        smtp_server(host="0.0.0.0") as (smtp_port, mailbox),
    ):
        hooks = destination_save(
            validate_destination(
                {"kind": "webhook", "url": f"http://127.0.0.1:{hook_port}/in", "method": "POST"}, name="hooks"
            )
        )[0]
        destination_save(
            validate_destination(
                {
                    "kind": "smtp",
                    "smtp_host": "127.0.0.1",
                    "smtp_port": smtp_port,
                    "starttls": False,
                    "from_address": "proposer@example.com",
                    "allowed_recipients": ["@example.com"],
                },
                name="mail",
            )
        )
        trust_rule_save(TrustRule(name="proposer-hooks", worker=worker, destination=hooks, max_per_day=5))
        args = {
            "direct": {"webhook": [site.gateway_ip, hook_port], "smtp": [site.gateway_ip, smtp_port]},
            "via_gateway": {
                "webhook_local": f"http://127.0.0.1:{hook_port}/in",
                "webhook_bridge": f"http://{site.gateway_ip}:{hook_port}/in",
            },
            "other_run": other_run.pk,
            "webhook": {
                "kind": "webhook",
                "destination": "hooks",
                "payload": {"text": "build green", "run": other_run.pk},
            },
            "email": {
                "kind": "email",
                "destination": "mail",
                "payload": {"to": ["team@example.com"], "subject": "Build report", "body": "All green."},
            },
            "poll_seconds": 90,
        }
        code = Path(site.settings["ROSTER_BOX_CODE_DIR"]) / worker.name
        code.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROBE, code / "propose_probe.py")
        # Through the queue, as runs are started: this stack's Celery worker and box watcher admit every
        # queued run, so one dispatched inline here could be claimed by them first (stack's docstring).
        run = run_start(worker, ["python3", "/code/propose_probe.py", json.dumps(args)], timeout=150)
        deadline = time.monotonic() + 90
        while not Proposal.objects.filter(kind="email", status="pending").exists():
            assert time.monotonic() < deadline, "the box's e-mail proposal never arrived"
            time.sleep(0.2)
        email = Proposal.objects.get(kind="email")
        services.proposal_decide(email.pk, approver, approve=True, channel="cli", reason="ok")
        run = wait_for_run(run.pk, set(Run.Status) - set(Run.LIVE_STATUSES), timeout=170)
        assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-3000:])
        line = next(line for line in run.output.splitlines() if line.startswith("PROPOSE "))
        probe = json.loads(line.removeprefix("PROPOSE "))

        # The destinations' hosts: not directly, not through the gateway (no grant to any write host).
        assert probe["direct_webhook"].startswith("blocked") and probe["direct_smtp"].startswith("blocked")
        assert probe["gateway_webhook_local"] == 403 and probe["gateway_webhook_bridge"] == 403
        # A run named in the body is refused; in headers and inside the payload it counts for nothing.
        assert probe["forged_top_level"]["status"] == 422
        assert probe["webhook"]["status"] == 201 and probe["email"]["status"] == 201, probe
        assert probe["webhook"]["body"]["status"] in ("approved", "executing", "executed")
        assert probe["final"]["webhook"]["status"] == "executed", probe["final"]
        assert probe["final"]["webhook"]["approved_by_rule"] is True
        assert (
            probe["final"]["email"]["status"] == "executed"
            and probe["final"]["email"]["outcome"] == "SMTP 250"
        )
        assert all(p.run_id == run.pk and p.worker_id == worker.pk for p in Proposal.objects.all())
        assert not Proposal.objects.filter(run=other_run).exists()
        # Delivered once each.
        assert [r["body"] for r in receiver.requests] == [{"text": "build green", "run": other_run.pk}]
        assert len(mailbox.messages) == 1 and b"Subject: Build report" in mailbox.messages[0][2]
