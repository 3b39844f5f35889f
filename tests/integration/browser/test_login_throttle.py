"""Login throttling in a real browser: repeated failures show the lockout page, which says nothing about
whether the user exists; the lockout is on the audit record."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditRecord
from tests.integration.browser import harness
from tests.integration.browser.conftest import LOGIN_PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.browser]


WRONG = "not-the-password"  # noqa: S105 - a test's deliberately wrong password


def _fail(page, base_url: str, username: str, password: str = WRONG) -> None:
    page.goto(base_url + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()


def test_repeated_failures_lock_out_and_are_audited(world, browser):
    base = world["base_url"]
    context = browser.new_context(viewport={"width": 1000, "height": 600})
    page = context.new_page()
    try:
        for _ in range(5):
            _fail(page, base, "alice")
        _fail(page, base, "alice", LOGIN_PASSWORD)  # the right password, too late
        assert page.locator("h1#locked-out").inner_text() == "Too many failed sign-ins"
        harness.shot(page, "25-login-locked-out")
        for _ in range(6):
            _fail(page, base, "no-such-person")
        assert page.locator("h1#locked-out").inner_text() == "Too many failed sign-ins"
        records = AuditRecord.objects.filter(kind="login_lockout")
        assert any('"username":"alice"' in r.body for r in records)
        assert any('"username":"no-such-person"' in r.body for r in records)
    finally:
        context.close()
