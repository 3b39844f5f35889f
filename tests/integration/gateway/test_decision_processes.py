"""The decision API served by several processes (ROSTER_DECISION_PROCESSES; the test stack runs 2): both
answer decisions, both are children of the one decision API process that bound the port, and the one
metrics listener adds up what each counted. Concurrent callers on connections of their own, which the
kernel hands to either process; the audit chain both appended to has no fork and verifies. (Every other
test of this stack goes through the gateway to the same 2 processes.)"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import httpx
import pytest
from django.db.models import Count

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.integration.gateway.conftest import grant, wait_until
from tests.integration.gateway.test_gateway_metrics import Scraper, at
from tests.support import procs

pytestmark = pytest.mark.integration
CALLERS, CALLS = 8, 5


def _per_process(samples) -> dict[str, float]:
    return {dict(labels)["pid"]: value for (name, labels), value in samples.items()
            if name == "roster_decision_process_decisions_total"}


def _parent(pid: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no parent for {pid}")


def _decide(stack, token) -> str:
    """One decision on a connection of its own (the gateway's pool would keep reusing the connections it
    opened, maybe before the second process was up): each new connection goes to whichever process
    accepts it."""
    body = {"token": token, "client": "127.0.0.1", "method": "GET", "scheme": "http", "host": "127.0.0.1",
            "port": stack.http.port, "path": "/ok", "headers": [], "body_size": 0,
            "body_sha256": hashlib.sha256(b"").hexdigest(), "body_preview": "", "mcp": []}
    response = httpx.post(stack.control_plane_url + "/api/gateway/decide", json=body, timeout=20,
                          headers={"Authorization": f"Bearer {GATEWAY_SERVICE_TOKEN}", "Connection": "close"},
                          trust_env=False)
    assert response.status_code == 200, response.text
    return response.json()["verdict"]


def _burst(stack, token) -> list[str]:
    verdicts: list[str] = []

    def caller():
        for _ in range(CALLS):
            verdicts.append(_decide(stack, token))

    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return verdicts


def test_two_processes_answer_decisions_and_their_counts_add_up(stack, token):
    grant("spread", stack.http)
    scraper = Scraper(stack)
    # Every process has loaded the app (its series is there, at 0 until it answers) and so is serving.
    assert wait_until(lambda: len(_per_process(scraper.control_plane()[0])) >= procs.DECISION_PROCESSES,
                      timeout=30), "not every decision API process came up"
    before, _ = scraper.control_plane()
    answered: dict[str, float] = {}
    sent = 0
    for _ in range(10):  # the kernel picks the process per connection: a few bursts reach both
        verdicts = _burst(stack, token)
        assert verdicts == ["allow"] * CALLERS * CALLS
        sent += len(verdicts)
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
