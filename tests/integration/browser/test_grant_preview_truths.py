"""Issue 27.3 (and the page side of 27.2) in Chromium: the grant page's preview of a grant with header
conditions shows ✓ for a request carrying headers that meet them, its "not matched" examples for an IP
literal are the neighbouring addresses (never www.127.0.0.1), a deny grant denies "at any taint", and a
grant naming a loopback literal carries the note that the gateway dials it only when listed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.policy.models import Grant
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def test_the_preview_tells_the_truth(world, page_for):
    root = User.objects.create_superuser("root-preview", password="browser-root-password-1")
    grant = world["grant"]
    Grant.objects.filter(pk=grant.pk).update(header_conditions=[
        {"name": "content-type", "equals": "application/json"}, {"name": "x-team", "matches": "team-[0-9]+"}])
    page = page_for(root, f"/admin/policy/grant/{grant.pk}/change/")
    preview = page.locator(".field-what_this_matches")
    text = preview.inner_text()
    port = world["upstream"].port
    assert (f"✓ matches POST http://127.0.0.1:{port}/any/path with content-type: application/json; "
            "x-team: team-0") in text
    assert f"✗ does not match POST http://127.0.0.1:{port}/any/path\n" in text + "\n"
    assert f"127.0.0.2:{port}" in text and f"127.0.0.0:{port}" in text
    assert "www.127.0.0.1" not in text and "evil.example" not in text
    assert page.locator("#private-literal-warning").count() == 1
    assert "loopback or private address" in page.locator("#private-literal-warning").inner_text()
    harness.shot(page, "27-3-grant-preview-conditions")

    deny = Grant.objects.create(slug="no-uploads", host="uploads.example.com", mode="deny")
    page.goto(world["base_url"] + f"/admin/policy/grant/{deny.pk}/change/")
    text = page.locator(".field-what_this_matches").inner_text()
    assert "Denies" in text and "at any taint" in text and "taint is at most" not in text
    assert page.locator("#private-literal-warning").count() == 0
    harness.shot(page, "27-3-grant-preview-deny")
