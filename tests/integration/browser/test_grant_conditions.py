"""An admin gives a grant header conditions and a body-size limit in the grant form, tests a request
against the unsaved change (the answer is a result panel, not a form error), saves, and the page's match
preview describes the saved conditions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.policy.models import Grant
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def test_admin_edits_header_conditions_and_tests_a_request(world, page_for):
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    grant = world["grant"]
    page = page_for(root, f"/admin/policy/grant/{grant.pk}/change/")
    page.fill("#id_header_conditions",
              "Content-Type: equals application/json\nx-http-method-override: absent")
    page.fill("#id_max_body_size", "64")
    page.check("#id_try_only")
    page.select_option("#id_try_worker", label=world["worker"].name)
    page.fill("#id_try_method", "POST")
    url = f"http://127.0.0.1:{world['upstream'].port}/v1/send"
    page.fill("#id_try_url", url)
    page.fill("#id_try_headers", "Content-Type: application/json\nX-HTTP-Method-Override: POST")
    page.fill("#id_try_body_size", "10")
    with page.expect_navigation():
        page.click("input[name=_save]")
    panel = page.locator("#trial-result")
    assert panel.is_visible()
    text = panel.inner_text()
    assert "Test result: deny" in text and "Test only, nothing saved" in text
    assert "aimed at it, but the request does not meet its condition: header x-http-method-override is " \
           "absent" in text
    assert page.locator(".errornote").count() == 0 and page.locator(".errorlist").count() == 0
    assert "This grant is broken" not in page.inner_text("body")  # the preview reads the saved grant
    harness.shot(page, "31-grant-conditions-test-refused")

    page.fill("#id_try_headers", "content-type: application/json")
    with page.expect_navigation():
        page.click("input[name=_save]")
    text = page.locator("#trial-result").inner_text()
    assert "Test result: ask" in text and f"POST {url}: ask by grant {grant.slug}" in text
    assert "judged with headers content-type and a body of 10 bytes" in text
    assert Grant.objects.get(pk=grant.pk).header_conditions == []  # nothing saved by a test
    harness.shot(page, "32-grant-conditions-test-ask")

    page.uncheck("#id_try_only")
    with page.expect_navigation():
        page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist, .errornote")
    assert page.locator(".errornote").count() == 0, page.inner_text("body")[:3000]
    saved = Grant.objects.get(pk=grant.pk)
    assert saved.header_conditions == [{"name": "content-type", "equals": "application/json"},
                                       {"name": "x-http-method-override", "absent": True}]
    assert saved.max_body_size == 64
    preview = page.locator(".field-what_this_matches").inner_text()
    assert "Only when header content-type equals 'application/json'; header x-http-method-override is " \
           "absent" in preview and "at most 64 bytes" in preview
    assert page.input_value("#id_header_conditions") == ("content-type: equals application/json\n"
                                                         "x-http-method-override: absent")
    harness.shot(page, "33-grant-conditions-saved")
