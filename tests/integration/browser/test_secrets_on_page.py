"""A held request carrying a sentinel: the approver's pages never show the sentinel or the real secret,
and once approved the gateway swaps in the real value toward the host the grant names."""

from __future__ import annotations

import time

import pytest

from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]

REAL_VALUE = "real-secret-value-Kq7Zp2Lm9Xw4"


def test_sentinel_and_secret_never_reach_the_page(world, page_for):
    secret = secret_set("mail-api", REAL_VALUE, kind="generic")
    worker = worker_create("courier")
    run, token = run_create(worker, command=["send"])
    run_set_status(run.pk, Run.Status.RUNNING)
    # This process is the run's "box": it dials the gateway over loopback, and a token is accepted only
    # from its box's address.
    Run.objects.filter(pk=run.pk).update(box_address="127.0.0.1")
    Grant.objects.create(
        slug="courier-send-ask", worker=worker, methods=["POST"], schemes=["http"], host="127.0.0.1",
        port=world["upstream"].port, mode=Grant.Mode.ASK, untrusted=False, secret=secret,
        inject_header="authorization", inject_format="Bearer {secret}",
    )
    alice = page_for(world["alice"])
    url = f"http://127.0.0.1:{world['upstream'].port}/v1/mail?key={secret.sentinel}"
    request = harness.HeldRequest(
        world["gateway"].proxy_url_with(token), url, f"token={secret.sentinel}".encode(),
        headers={"authorization": f"Bearer {secret.sentinel}", "x-note": f"s={secret.sentinel}"},
    ).start()
    alice.wait_for_selector("article.approval", timeout=20000)
    html = alice.content()
    assert secret.sentinel not in html and REAL_VALUE not in html
    assert "sentinel of mail-api" in html or "[masked]" in html
    harness.shot(alice, "11-queue-sentinel-masked")
    received_before = len(harness._Upstream.received)
    alice.locator("article.approval").get_by_role("button", name="Approve").click()
    assert request.result().status_code == 200
    deadline = time.monotonic() + 5
    while len(harness._Upstream.received) == received_before and time.monotonic() < deadline:
        time.sleep(0.05)
    _method, _path, _body, headers = harness._Upstream.received[-1]
    assert headers["authorization"] == f"Bearer {REAL_VALUE}"  # swapped in transit, toward this host only
    for path in (f"/runs/{run.pk}/", "/approvals/", "/"):
        alice.goto(world["base_url"] + path)
        page = alice.content()
        assert secret.sentinel not in page and REAL_VALUE not in page, path
    carol = page_for(world["carol"], f"/audit/?run={run.pk}")
    carol.locator("details").first.wait_for()
    assert carol.locator("tr[data-seq]").count() >= 4
    page = carol.content()
    assert secret.sentinel not in page and REAL_VALUE not in page
