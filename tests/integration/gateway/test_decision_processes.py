"""The decision API served by several processes (ROSTER_DECISION_PROCESSES; the test stack runs 2): both
answer decisions, both are children of the one decision API process that bound the port, and the one
metrics listener adds up what each counted. Through the real gateway (mitmdump) with concurrent boxes,
so the gateway holds several connections to the decision API and the kernel hands them to either
process; the audit chain all of them appended to has no fork and verifies."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.db.models import Count

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from tests.integration.gateway.conftest import box_client, grant
from tests.integration.gateway.test_gateway_metrics import Scraper, at
from tests.support import procs

pytestmark = pytest.mark.integration
BOXES, CALLS = 8, 6


def _per_process(samples) -> dict[str, float]:
    return {dict(labels)["pid"]: value for (name, labels), value in samples.items()
            if name == "roster_decision_process_decisions_total"}


def _parent(pid: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no parent for {pid}")


def _burst(stack, token) -> list[int]:
    statuses: list[int] = []

    def box():
        with box_client(stack.gateway, token) as client:
            for _ in range(CALLS):
                statuses.append(client.get(stack.http.url("/ok")).status_code)

    threads = [threading.Thread(target=box) for _ in range(BOXES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def test_two_processes_answer_decisions_and_their_counts_add_up(stack, token):
    grant("spread", stack.http)
    scraper = Scraper(stack)
    before, _ = scraper.control_plane()
    answered: dict[str, float] = {}
    sent = 0
    for _ in range(5):  # the kernel picks the process per connection: a few bursts reach both
        statuses = _burst(stack, token)
        assert statuses == [200] * BOXES * CALLS
        sent += len(statuses)
        after, _ = scraper.control_plane()
        answered = {pid: n - _per_process(before).get(pid, 0) for pid, n in _per_process(after).items()}
        if sum(1 for n in answered.values() if n > 0) >= procs.DECISION_PROCESSES:
            break
    served = sorted(pid for pid, n in answered.items() if n > 0)
    assert len(served) == procs.DECISION_PROCESSES, answered
    # The processes' counts are summed by the one listener, exactly: every decision counted once.
    total = at(after, "roster_decisions_total", verdict="allow", reason="granted") - at(
        before, "roster_decisions_total", verdict="allow", reason="granted")
    assert total == sum(answered.values()) == sent
    parents = {_parent(pid) for pid in served}
    assert len(parents) == 1, parents  # uvicorn's workers of one decision API
    parent = parents.pop()
    command = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
    assert b"controlplane.decision_server" in command, command
    forks = AuditRecord.objects.values("prev_hash").annotate(n=Count("id")).filter(n__gt=1).count()
    assert forks == 0 and verify_database().ok
