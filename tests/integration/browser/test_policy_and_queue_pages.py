"""Issue 27.6 and 27.7 in Chromium: a worker's effective policy on one page (grants in the engine's order,
secrets by name, caps with what is spent, "test a request" answered by the real engine and writing nothing),
and a queued run's timeline saying why it waits and where it stands."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create
from controlplane.ledger.models import Cap
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]
SECRET_VALUE = "sk-live-policy-page-VALUE-0001"


def test_an_admin_reads_a_workers_policy_and_tests_a_request_on_it(world, page_for):
    worker = world["worker"]
    key = secret_set("mailer-key", SECRET_VALUE)
    Grant.objects.create(slug="no-uploads", worker=worker, host="uploads.example.com", mode="deny",
                         description="never upload anything")
    Grant.objects.create(slug="mail-api", worker=worker, host="mail.example.com", methods=["POST"],
                         paths=["/v1/send"], mode="auto", secret=key, inject_header="authorization",
                         inject_format="Bearer {secret}", description="send the digest")
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=250)
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    page = page_for(root, f"/workers/{worker.pk}/policy/")
    text = page.inner_text("body")
    order = [text.index(slug) for slug in ("no-uploads", "mail-api", "upstream-post-ask")]
    assert order[0] < order[1], "a deny comes first"
    assert "mailer-key" in text and SECRET_VALUE not in page.content()
    assert "never upload anything" in text and "250" in text
    harness.shot(page, "27-6-worker-policy")

    before = AuditRecord.objects.count()
    page.select_option("select[name=method]", "POST")
    page.fill("input[name=url]", "https://uploads.example.com/files")
    page.click("#test-request button[type=submit]")
    page.wait_for_load_state()
    verdict = page.inner_text("body")
    assert "POST https://uploads.example.com:443/files: deny" in verdict and "no-uploads" in verdict
    harness.shot(page, "27-6-worker-policy-test-deny")
    page.fill("input[name=url]", "not a url")
    page.click("#test-request button[type=submit]")
    page.wait_for_load_state()
    assert "the test request is not valid" in page.inner_text("body")
    assert AuditRecord.objects.count() == before, "testing a request writes nothing"


def test_a_queued_runs_timeline_says_why_it_waits_and_its_position(world, page_for):
    # Earlier tests of the session may have left queued runs behind: positions are counted from the
    # database as the page counts them (every queued run, oldest first).
    runs = [run_create(world["worker"], command=["digest", str(n)])[0] for n in range(3)]
    queued = Run.objects.filter(status=Run.Status.QUEUED)
    total, ahead = queued.count(), queued.filter(pk__lt=runs[2].pk).count()
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    page = page_for(root, f"/runs/{runs[2].pk}/")
    position = page.inner_text("#queue-position")
    assert position.startswith(f"{ahead + 1} of {total}"), position
    reason = page.inner_text("#queue-reason")
    assert reason.startswith("waiting"), reason
    assert f"position {ahead + 1} of {total} ({ahead} runs ahead of it)" in reason, reason
    harness.shot(page, "27-7-queued-run-position")
    first = page_for(root, f"/runs/{runs[0].pk}/")
    assert f"position {ahead - 1} of {total}" in first.inner_text("#queue-reason")
