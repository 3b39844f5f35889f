"""The request as judged is the request as sent (canonical.py): path, method and Host must already be
in the canonical form the control plane judges. The path table is shared with the control plane's
normaliser (tests/contract/canonical/paths.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roster_gateway.canonical import Unreadable, canonical_path, host_refusal, method_refusal, path_refusal

from tests.conftest import PUBLIC_IP, answer, make_flow, run_request

TABLE = json.loads((Path(__file__).resolve().parents[2] / "tests" / "contract" / "canonical" / "paths.json")
                   .read_text())["cases"]


@pytest.mark.parametrize("raw,canonical", TABLE, ids=[c[0] or "empty" for c in TABLE])
def test_canonical_path_agrees_with_the_shared_table(raw, canonical):
    if canonical is None:
        with pytest.raises(Unreadable):
            canonical_path(raw)
    else:
        assert canonical_path(raw) == canonical


@pytest.mark.parametrize("raw,canonical", [c for c in TABLE if c[0]], ids=[c[0] for c in TABLE if c[0]])
def test_a_path_is_forwarded_only_in_canonical_form(raw, canonical):
    refused = path_refusal(raw + "?q=1")
    assert (refused is not None) == (canonical is not None and canonical != raw)


METHODS = [("GET", False), ("POST", False), ("get", True), ("Post", True), ("dElEtE", True)]


@pytest.mark.parametrize("method,refused", METHODS, ids=[m for m, _ in METHODS])
def test_method_must_be_upper_case(method, refused):
    assert (method_refusal(method) is not None) == refused


HOSTS = [("example.com", False), ("example.com:8080", False), ("example.com:443", False),
         ("[::1]:8080", False), ("Example.com", True), ("EXAMPLE.COM:80", True), ("example.com.", True),
         ("example.com.:80", True), ("example.com:0080", True), ("[::1]:08080", True)]


@pytest.mark.parametrize("host,refused", HOSTS, ids=[h for h, _ in HOSTS])
def test_host_must_be_canonical(host, refused):
    assert (host_refusal(host) is not None) == refused


FLOWS = [
    ("dot segments", {"path": "/v1/public/../admin"}),
    ("encoded dot segments", {"path": "/v1/public/%2e%2e/admin"}),
    ("empty segment", {"path": "/v1//admin"}),
    ("lower-case method", {"method": "get"}),
    ("mixed-case Host", {"host_header": PUBLIC_IP + "."}),
]


@pytest.mark.parametrize("name,over", FLOWS, ids=[f[0] for f in FLOWS])
async def test_non_canonical_requests_are_400_before_any_decision(gw, cp, name, over):
    flow = await run_request(gw, make_flow(**over))
    assert flow.response.status_code == 400 and answer(flow)["reason"] == "malformed_request"
    assert cp.bodies("/decide") == []


async def test_a_canonical_request_is_judged_and_forwarded_as_sent(gw, cp):
    flow = await run_request(gw, make_flow(path="/v1/caf%C3%A9/x;y=1?a=%2e%2e"))
    assert flow.response is None
    [decide] = cp.bodies("/decide")
    assert decide["path"] == flow.request.path == "/v1/caf%C3%A9/x;y=1?a=%2e%2e"
