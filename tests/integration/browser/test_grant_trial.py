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
