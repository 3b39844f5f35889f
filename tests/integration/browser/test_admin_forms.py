"""Issue 27.11 in Chromium, as an admin: the model price form refuses `gpt-4o[` beside the field and saves
nothing, takes prices in currency and lists them with their micro value; a webhook destination's change
form shows only the webhook's fields."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.ledger.models import ModelPrice
from controlplane.proposals.models import Destination
from controlplane.proposals.services import destination_save
from controlplane.proposals.validation import validate_destination
from tests.integration.browser import harness

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def test_price_and_destination_forms(world, page_for):
    root = User.objects.create_superuser("root-admin", password="pw-root-admin-1")
    page = page_for(root, "/admin/ledger/modelprice/add/")
    page.fill("#id_pattern", "gpt-4o[")
    page.fill("#id_input_micro_per_million__currency", "2.50")
    page.fill("#id_cached_input_micro_per_million__currency", "1.25")
    page.fill("#id_output_micro_per_million__currency", "10")
    page.fill("#id_max_output_tokens", "16384")
    page.click("input[name=_save]")
    page.wait_for_selector(".errorlist")
    harness.shot(page, "forms-price-pattern-refused")
    assert "is never closed" in page.locator(".field-pattern").inner_text()
    assert not ModelPrice.objects.exists()
    page.fill("#id_pattern", "gpt-4o*")
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/ledger/modelprice/")
    harness.shot(page, "forms-price-list-in-currency")
    assert "2.5 (2,500,000 micro)" in page.locator("#result_list").inner_text()
    assert ModelPrice.objects.get().input_micro_per_million == 2_500_000

    dest = destination_save(validate_destination(
        {"kind": "webhook", "url": "https://hooks.example.com/in", "method": "POST"}, name="hooks"))[0]
    assert Destination.objects.filter(pk=dest.pk).exists()
    page.goto(f"{world['base_url']}/admin/proposals/destination/{dest.pk}/change/")
    harness.shot(page, "forms-webhook-destination-fields")
    assert page.locator("#id_url").is_visible()
    assert page.locator("#id_smtp_host").count() == 0 and page.locator("#id_branch_pattern").count() == 0
