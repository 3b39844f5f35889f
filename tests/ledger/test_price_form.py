"""Issue 27.11, the model price form: a pattern no model name can match is refused (`gpt-4o[`, `my
model`) with nothing saved, on the admin and on price_save; prices are typed in currency per million
tokens and stored as micro-currency, each field showing the micro value it stands for."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from controlplane.audit.models import AuditRecord
from controlplane.ledger import caps
from controlplane.ledger.models import ModelPrice

pytestmark = pytest.mark.django_db
ADD = "/admin/ledger/modelprice/add/"
PRICES = {"input_micro_per_million__currency": "2.50", "cached_input_micro_per_million__currency": "1.25",
          "output_micro_per_million__currency": "10", "max_output_tokens": "16384"}


@pytest.fixture
def root_client():
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-123456789"))
    return client


@pytest.mark.parametrize(("pattern", "said"), [
    ("gpt-4o[", "is never closed"), ("my model", "has a space"), ("gpt-[]x", "empty"), ("  ", "a pattern is"),
])
def test_a_pattern_no_model_name_matches_is_refused(root_client, pattern, said):
    before = AuditRecord.objects.count()
    response = root_client.post(ADD, {"pattern": pattern, **PRICES})
    assert response.status_code == 200 and said in response.content.decode()
    assert not ModelPrice.objects.exists() and AuditRecord.objects.count() == before


def test_price_save_refuses_it_too(admin_user):
    with pytest.raises(ValidationError, match="never closed"):
        caps.price_save(ModelPrice(pattern="gpt-4o[", input_micro_per_million=1,
                                   cached_input_micro_per_million=1, output_micro_per_million=1,
                                   max_output_tokens=1), admin_user)
    assert not ModelPrice.objects.exists()


def test_prices_are_typed_in_currency_and_stored_as_micro(root_client):
    response = root_client.post(ADD, {"pattern": "gpt-4o*", **PRICES})
    assert response.status_code == 302, response.content.decode()[-3000:]
    price = ModelPrice.objects.get()
    assert (price.input_micro_per_million, price.cached_input_micro_per_million,
            price.output_micro_per_million) == (2_500_000, 1_250_000, 10_000_000)
    assert price.cache_write_micro_per_million is None and price.cache_write_1h_micro_per_million is None
    page = root_client.get(f"/admin/ledger/modelprice/{price.pk}/change/").content.decode()
    assert "currency per million tokens" in page and "now 2.5 (2,500,000 micro)" in page
    assert 'value="2.5' in page  # the form shows the currency value, not 2500000
    listing = root_client.get("/admin/ledger/modelprice/").content.decode()
    assert "10 (10,000,000 micro)" in listing


def test_a_negative_or_fractional_micro_price_is_refused(root_client):
    response = root_client.post(ADD, {"pattern": "gpt-4o*", **PRICES,
                                      "output_micro_per_million__currency": "-1"})
    assert response.status_code == 200 and not ModelPrice.objects.exists()
    response = root_client.post(ADD, {"pattern": "gpt-4o*", **PRICES,
                                      "output_micro_per_million__currency": "0.0000001"})
    assert response.status_code == 200 and not ModelPrice.objects.exists()
