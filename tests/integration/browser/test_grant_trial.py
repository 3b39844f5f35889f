"""An admin tries a request on the grant page with an unsaved change: the answer names the deciding
grant and why, and nothing is saved."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.policy.models import Grant
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def test_admin_tests_a_request_with_unsaved_changes(world, page_for):
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    grant = world["grant"]
    page = page_for(root, f"/admin/policy/grant/{grant.pk}/change/")
    page.fill("#id_paths", "/v2/**")  # unsaved change
    page.check("#id_try_only")
    page.select_option("#id_try_worker", label=world["worker"].name)
    page.fill("#id_try_method", "POST")
    page.fill("#id_try_url", f"http://127.0.0.1:{world['upstream'].port}/v2/send")
    page.click("input[name=_save]")
    page.wait_for_load_state()
    text = page.inner_text("body")
    assert "Test only, nothing saved" in text
    assert f"POST http://127.0.0.1:{world['upstream'].port}/v2/send: ask by grant {grant.slug}" in text
    assert page.input_value("#id_paths") == "/v2/**"  # the draft is still on the page
    harness.shot(page, "27-grant-test-a-request")
    assert Grant.objects.get(pk=grant.pk).paths == grant.paths


def test_admin_dry_runs_an_unsaved_change_against_recorded_traffic(world, page_for):
    import threading
    import time

    from controlplane.approvals.models import Approval
    from controlplane.approvals.services import approval_decide
    from tests.integration.browser.conftest import hold

    request = hold(world)  # recorded through the real gateway and decision API as an "ask"
    deadline = time.monotonic() + 20
    while not Approval.objects.filter(run=world["run"], status="pending").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    approval = Approval.objects.get(run=world["run"])
    decider = threading.Thread(target=approval_decide, args=(approval.pk, world["bob"], False, "cli"))
    decider.start()
    decider.join(20)
    assert request.result().status_code == 403
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    page = page_for(root, f"/admin/policy/grant/{world['grant'].pk}/change/")
    page.select_option("#id_mode", "deny")  # unsaved: this grant would now refuse
    page.check("#id_try_only")
    page.fill("#id_try_dry_run_days", "1")
    page.click("input[name=_save]")
    page.wait_for_load_state()
    text = page.inner_text("body")
    assert "dry-run: 1 decisions replayed, 1 would change" in text
    assert "127.0.0.1 / mailer: 1 would change" in text and "ask -> deny" in text
    harness.shot(page, "28-grant-dry-run")
    assert Grant.objects.get(pk=world["grant"].pk).mode == "ask"

