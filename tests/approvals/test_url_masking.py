"""Approval snapshots mask sentinels and credential query values in the URL, as they do in headers and
the body preview (controlplane.vault.redact)."""

import pytest

from controlplane.approvals.services import request_snapshot
from controlplane.vault.redact import MASK, url_for_record
from controlplane.vault.services import secret_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def sentinel(db):
    return secret_set("openai", "real-value-never-recorded-1234", kind="openai").sentinel


def _snapshot(url, **kw):
    return request_snapshot(method="GET", url=url, headers=[], body_preview="", body_sha256="",
                            body_size=0, **kw)


def test_snapshot_url_masks_a_vault_sentinel_in_path_and_query(sentinel):
    url = f"https://h:443/v1/{sentinel}/x?q={sentinel}&page=2"
    shown = _snapshot(url)["url"]
    assert sentinel not in shown
    named = "[sentinel of openai]"
    assert shown == f"https://h:443/v1/{named}/x?q={named}&page=2"


def test_snapshot_url_masks_percent_encoded_sentinels(sentinel):
    encoded = "".join(f"%{ord(c):02X}" for c in sentinel[:6]) + sentinel[6:]
    shown = _snapshot(f"https://h:443/a/{encoded}?x={encoded}")["url"]
    assert sentinel[6:] not in shown and shown == f"https://h:443/a/{MASK}?x={MASK}"


def test_snapshot_url_masks_literal_sentinels_given_by_the_caller():
    shown = _snapshot("https://h:443/p?q=SENTINEL-1", sentinels=frozenset({"SENTINEL-1"}))["url"]
    assert shown == f"https://h:443/p?q={MASK}"


@pytest.mark.parametrize("name", ["key", "token", "access_token", "api_key", "sig", "X-Amz-Signature",
                                  "client_secret", "password", "apiKey", "%6Bey", "refresh_token"])
def test_credential_query_values_are_masked(db, name):
    shown = url_for_record(f"https://h:443/p?a=1&{name}=s3cr3t-value&b=2;{name}=again")
    assert "s3cr3t-value" not in shown and "again" not in shown
    assert shown == f"https://h:443/p?a=1&{name}={MASK}&b=2;{name}={MASK}"


def test_ordinary_urls_are_recorded_as_received(db):
    for url in ("https://h:443/v1/chat?x=1&page=2", "https://h:443/a%20b", "tunnel://h:22", "/p?q="):
        assert url_for_record(url) == url
