"""A run's token is bound to its box, through the real gateway: the box's own requests pass the token
check (and are judged on their grants), while the same token read from the host (`docker inspect`, as the
held-out probe did) and used from the host is refused as bad_token, audited with where it came from.
Before, a token worked from anywhere that reached the gateway."""

from __future__ import annotations

import json
import threading
import time
from urllib.parse import unquote, urlsplit

import pytest
import requests
from django.db import connection

from controlplane.audit.models import AuditRecord
from controlplane.dispatch import running
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create

pytestmark = [pytest.mark.integration, pytest.mark.docker]

# Asks at once (the first request a box makes), again a moment later, then stays up for the host's try.
BOX = ("import sys, time, urllib.request, urllib.error\n"
       "def ask():\n"
       "    try:\n"
       "        urllib.request.urlopen('http://example.com/', timeout=20)\n"
       "        return 200, ''\n"
       "    except urllib.error.HTTPError as exc:\n"
       "        return exc.code, exc.read().decode()\n"
       "for attempt in range(2):\n"
       "    status, body = ask()\n"
       "    print('BOX', status, body.replace('\\n', ' '), flush=True)\n"
       "    time.sleep(1)\n"
       "time.sleep(25)\n")


def _wait_for(predicate, timeout=60.0):
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("gave up waiting")


def test_a_token_read_from_the_box_is_refused_from_the_host(stack, docker_client):
    worker = worker_create("bound-token")
    run, _ = run_create(worker, command=["python3", "-c", BOX], timeout_seconds=60)

    def dispatch():
        try:
            running.run_dispatch(run.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=dispatch, daemon=True)
    thread.start()
    box_address = _wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING)
                            .values_list("box_address", flat=True).first())
    container = docker_client.containers.get(
        Run.objects.values_list("container_id", flat=True).get(pk=run.pk))
    env = dict(item.split("=", 1) for item in container.attrs["Config"]["Env"])
    proxy = env["HTTP_PROXY"]
    token = unquote(urlsplit(proxy).password)
    assert token.startswith("rt_")

    answer = requests.get("http://example.com/", proxies={"http": proxy}, timeout=20)
    assert answer.status_code == 407
    assert answer.json()["reason"] == "bad_token"
    assert box_address not in answer.text  # the caller learns nothing about the box

    records = [json.loads(r.body)["data"] for r in AuditRecord.objects.filter(
        kind="decision", reason="bad_token", run_id_ref=run.pk)]
    host_address = stack.site.gateway_ip  # the host's own address on the bridge: where it dials from
    details = [r["detail"] for r in records]
    assert f"token presented from {host_address}, run's box is {box_address}" in details

    _wait_for(lambda: AuditRecord.objects.filter(kind="decision", run_id_ref=run.pk).exclude(
        reason="bad_token").count() >= 2)
    time.sleep(0.5)  # the box's second line, printed after its answer
    container.kill()
    thread.join(timeout=60)
    run.refresh_from_db()
    box_lines = [line for line in run.output.splitlines() if line.startswith("BOX ")]
    assert len(box_lines) == 2, (run.status, run.status_reason, thread.is_alive(), run.output)
    # The box's own requests pass the token check, the very first one too: judged on grants (none: 403).
    for line in box_lines:
        assert line.startswith("BOX 403") and "no_grant" in line, line
