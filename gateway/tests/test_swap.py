"""Sentinel swap: literal occurrences in header values and inside HTTP Basic credentials (decoded,
swapped within user:password, re-encoded), only for the sentinels the decision names; anything that
cannot be swapped exactly refuses the request."""

from __future__ import annotations

import base64
import json

import pytest
from roster_gateway.swap import SwapRefused, apply_secrets
from roster_gateway.wire import parse_decision

from tests.conftest import allow, make_flow

SENTINEL = "sk-proj-SENTINELsentinelSENTINELsentinel0123456789ab"
OTHER_SENTINEL = "ghp_OTHERsentinelOTHERsentinelOTHERsent"
REAL = "real-key-Zq8vP3kL0xW9"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def decision(*pairs):
    return parse_decision(allow(replace=[{"sentinel": s, "value": v} for s, v in pairs]))


def swapped(headers, *pairs):
    flow = make_flow(headers=headers, token=None)
    apply_secrets(flow.request, decision(*pairs))
    return flow.request.headers


def test_basic_password_sentinel_is_swapped_and_reencoded():
    headers = swapped([("authorization", f"Basic {b64(f'me:{SENTINEL}')}")], (SENTINEL, REAL))
    scheme, token = headers["authorization"].split(" ")
    assert scheme == "Basic" and base64.b64decode(token, validate=True).decode() == f"me:{REAL}"


def test_basic_user_sentinel_and_case_insensitive_scheme():
    headers = swapped([("authorization", f"basic  {b64(f'{SENTINEL}:x')}")], (SENTINEL, REAL))
    assert headers["authorization"] == f"basic  {b64(f'{REAL}:x')}"


def test_only_the_named_sentinel_is_swapped():
    value = f"Basic {b64(f'{OTHER_SENTINEL}:{SENTINEL}')}"
    headers = swapped([("authorization", value)], (SENTINEL, REAL))
    assert base64.b64decode(headers["authorization"].split()[1]).decode() == f"{OTHER_SENTINEL}:{REAL}"


def test_basic_without_a_sentinel_is_left_byte_for_byte():
    value = f"Basic {b64('me:plain-password')}"
    assert swapped([("authorization", value)], (SENTINEL, REAL))["authorization"] == value


def test_literal_swap_still_works_beside_basic():
    headers = swapped([("x-key", f"pre {SENTINEL} post"), ("authorization", f"Basic {b64('u:' + SENTINEL)}")],
                      (SENTINEL, REAL))
    assert headers["x-key"] == f"pre {REAL} post"
    assert base64.b64decode(headers["authorization"].split()[1]).decode() == f"u:{REAL}"


def test_no_replace_leaves_basic_alone():
    value = f"Basic {b64('u:' + SENTINEL)}"
    flow = make_flow(headers=[("authorization", value)], token=None)
    apply_secrets(flow.request, parse_decision(allow()))
    assert flow.request.headers["authorization"] == value


@pytest.mark.parametrize("token", [
    b64("u:" + SENTINEL + "!").rstrip("="),                                       # padding dropped
    base64.urlsafe_b64encode(("u:" + SENTINEL).encode() + b"\xfb\xff\xbf").decode(),  # url-safe alphabet
    b64("u:" + SENTINEL + "-tail")[:-2] + "*x",                                    # a stray character
])
def test_malformed_base64_carrying_the_sentinel_refuses_and_changes_nothing(token):
    with pytest.raises(ValueError):
        base64.b64decode(token, validate=True)
    flow = make_flow(headers=[("x-key", SENTINEL), ("authorization", f"Basic {token}")], token=None)
    with pytest.raises(SwapRefused):
        apply_secrets(flow.request, decision((SENTINEL, REAL)))
    assert flow.request.headers["x-key"] == SENTINEL  # nothing half-swapped
    assert REAL not in str(flow.request.headers)


def test_malformed_base64_without_our_sentinel_is_left_alone():
    headers = swapped([("x-note", "basic usage_information"), ("x-key", SENTINEL)], (SENTINEL, REAL))
    assert headers["x-note"] == "basic usage_information" and headers["x-key"] == REAL


def test_a_secret_with_a_colon_cannot_become_a_user_id():
    with pytest.raises(SwapRefused):
        swapped([("authorization", f"Basic {b64(SENTINEL + ':pw')}")], (SENTINEL, "user:smuggled"))
    # ...but a password may contain ':'.
    headers = swapped([("authorization", f"Basic {b64('me:' + SENTINEL)}")], (SENTINEL, "pa:ss"))
    assert base64.b64decode(headers["authorization"].split()[1]).decode() == "me:pa:ss"


async def test_addon_refuses_a_request_whose_basic_sentinel_cannot_be_swapped(gw, cp):
    cp.decide = allow(replace=[{"sentinel": SENTINEL, "value": REAL}])
    bad = b64("u:" + SENTINEL + "!").rstrip("=")
    flow = make_flow(headers=[("authorization", f"Basic {bad}")])
    gw.requestheaders(flow)
    await gw.request(flow)
    assert flow.response is not None and flow.response.status_code == 400
    body = json.loads(flow.response.content)
    assert body["reason"] == "malformed_request"
    assert REAL.encode() not in flow.response.content and REAL not in str(flow.request.headers)


async def test_addon_forwards_swapped_basic_credentials(gw, cp):
    cp.decide = allow(replace=[{"sentinel": SENTINEL, "value": REAL}])
    flow = make_flow(headers=[("authorization", f"Basic {b64('u:' + SENTINEL)}")])
    gw.requestheaders(flow)
    await gw.request(flow)
    assert flow.response is None
    assert base64.b64decode(flow.request.headers["authorization"].split()[1]).decode() == f"u:{REAL}"
