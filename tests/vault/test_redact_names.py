"""One definition of a credential-looking name (controlplane.vault.redact.is_credential_name) serves
query parameters in records, header values in approval snapshots and header values on the approval
pages: every name any of them masked before it was one definition is still masked, by all three."""

from __future__ import annotations

import pytest

from controlplane.approvals.services import request_snapshot
from controlplane.vault.masking import mask_headers
from controlplane.vault.redact import MASK, is_credential_name, url_for_record

CREDENTIAL_NAMES = [
    "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key", "api_key", "apikey",
    "X-Auth-Token", "access_token", "X-Amz-Security-Token", "X-Session-Id", "Password", "passwd",
    "X-Signature", "X-Client-Secret", "Private-Token", "X-Credential", "sig", "code", "jwt", "bearer",
    "a%70i_key",
]
ORDINARY_NAMES = ["Content-Type", "Accept", "User-Agent", "X-Request-Id", "page", "q", "limit"]


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_credential_names(name):
    assert is_credential_name(name)


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_ordinary_names(name):
    assert not is_credential_name(name)


@pytest.mark.django_db
@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_every_consumer_masks_the_same_names(name):
    value = "not-a-sentinel-but-a-credential"
    snapshot = request_snapshot(method="GET", url=f"https://h:443/p?{name}={value}", headers=[[name, value]],
                                body_preview="", body_sha256="", body_size=0)
    assert snapshot["headers"] == [[name, MASK]]
    assert snapshot["url"] == f"https://h:443/p?{name}={MASK}"
    assert url_for_record(f"https://h:443/p?{name}={value}") == f"https://h:443/p?{name}={MASK}"
    [(shown_name, shown_value)] = mask_headers([[name, value]], {})
    assert shown_value == MASK and value not in shown_value


@pytest.mark.django_db
@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_ordinary_values_are_shown(name):
    snapshot = request_snapshot(method="GET", url="https://h:443/p", headers=[[name, "plain"]],
                                body_preview="", body_sha256="", body_size=0)
    assert snapshot["headers"] == [[name, "plain"]]
    assert mask_headers([[name, "plain"]], {}) == [(name, "plain")]
