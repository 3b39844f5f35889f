"""The wire fixtures in tests/contract/ (shared with the control plane's tests) drive the addon: every
request the gateway builds has the fixture's shape, and every answer leads to the right box response."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from roster_gateway import model_flow
from roster_gateway.facts import client_address, decide_payload
from roster_gateway.mcp import mcp_calls
from roster_gateway.sentinels import SentinelFinder
from roster_gateway.usage import Usage
from roster_gateway.wire import parse_decision, parse_wait

from tests.conftest import make_flow

CONTRACT = Path(__file__).resolve().parents[2] / "tests" / "contract"
# deny_reasons.json is a shared table (reason -> status), not an exchange.
FIXTURES = {p.stem: json.loads(p.read_text()) for p in sorted(CONTRACT.glob("*.json"))
            if p.stem != "deny_reasons"}
DECIDE = sorted(n for n, f in FIXTURES.items()
                if f["endpoint"].endswith("/decide") and f["status_code"] == 200)
SENTINEL = "sk-proj-EXAMPLEsentinelEXAMPLEsentinelEXAMPLEsentinel"
WAITS = sorted(n for n, f in FIXTURES.items() if f["endpoint"].endswith("/wait"))


def test_fixtures_are_present():
    assert len(DECIDE) >= 10 and len(WAITS) == 5, f"tests/contract/ fixtures missing: {sorted(FIXTURES)}"


def _flow_like(request: dict):
    """A box request that should produce the fixture's /decide request (each fixture's body preview is
    its whole body; tests/contract/test_fixture_consistency.py keeps them so)."""
    headers = [(k, v) for k, v in request["headers"] if k != "host"]
    host_header = request["host"] if request["port"] in (80, 443) else f"{request['host']}:{request['port']}"
    return make_flow(host=request["host"], port=request["port"], scheme=request["scheme"],
                     method=request["method"], path=request["path"], headers=headers,
                     content=request["body_preview"].encode(), host_header=host_header,
                     token=request["token"])


@pytest.mark.parametrize("name", [n for n in DECIDE if FIXTURES[n]["request"]["scheme"] != "tunnel"])
def test_gateway_builds_the_fixture_decide_request(name):
    expected = FIXTURES[name]["request"]
    flow = _flow_like(expected)
    body = flow.request.get_content()
    mcp = mcp_calls(flow.request.headers.get("content-type", ""), body)
    # The fixtures' sentinel is the only one the control plane knows in them.
    found = SentinelFinder([SENTINEL]).found_in_request(flow.request, 1 << 20)
    flow.client_conn.peername = (expected["client"], 43210)  # the box's end of the connection
    payload = decide_payload(flow.request, token=expected["token"], client=client_address(flow),
                             scheme=expected["scheme"], mcp=mcp,
                             preview_bytes=4096, sentinels=found)
    model_flow.note_request(flow, body, payload)
    assert set(payload) == set(expected)
    assert payload.get("model_call") == expected.get("model_call")
    keys = ["token", "client", "method", "scheme", "host", "port", "path", "mcp", "body_size", "body_sha256",
            "body_preview"]
    for key in keys:
        assert payload[key] == expected[key], key
    for key, value in expected.items():
        assert type(payload[key]) is type(value), key
    for header in expected["headers"]:
        assert header in payload["headers"]
    assert all(name != "proxy-authorization" for name, _ in payload["headers"])


@pytest.mark.parametrize("name", DECIDE)
async def test_addon_answers_each_fixture_decision(gw, cp, name):
    fixture = FIXTURES[name]
    answer = fixture["response"]
    decision = parse_decision(answer)
    if answer["verdict"] == "ask":
        cp.decide = answer
        cp.waits = [FIXTURES["wait_refused"]["response"]]
    else:
        cp.decide = answer
    flow = make_flow(host="93.184.216.34", token="rt_fixture",
                     headers=[("authorization", f"Bearer {SENTINEL}")])
    if answer["verdict"] == "allow" and answer["tunnel"]:
        flow = make_flow(method="CONNECT", host="93.184.216.34", port=443, path="", token="rt_fixture",
                         host_header="93.184.216.34:443")
        await gw.http_connect(flow)
        assert flow.response is None and gw.conns[flow.client_conn.id].tunnel
        sent, expected = cp.bodies("/decide")[0], fixture["request"]
        assert set(sent) == set(expected)
        assert (sent["method"], sent["scheme"], sent["path"], sent["mcp"]) == (
            expected["method"], expected["scheme"], expected["path"], expected["mcp"])
        return
    gw.requestheaders(flow)
    await gw.request(flow)
    if answer["verdict"] == "allow":
        assert flow.response is None
        for item in answer["inject"]:
            assert flow.request.headers[item["header"]] == item["value"]
        for item in answer["replace"]:
            assert item["sentinel"] not in str(flow.request.headers)
        assert ("/trace" in str(cp.paths())) is answer["trace"]
        return
    body = json.loads(flow.response.content)
    expected_reason = answer["reason"] or "approval_refused"
    assert body["reason"] == expected_reason
    if answer["verdict"] == "deny":
        assert flow.response.status_code == (407 if answer["reason"] == "bad_token" else answer["status"])
        assert body["budget"] == answer["budget"] if answer["budget"] else "budget" not in body
    for item in decision.inject + decision.replace:
        assert item[1].encode() not in flow.response.content


@pytest.mark.parametrize("name", WAITS)
def test_wait_fixtures_parse(name):
    fixture = FIXTURES[name]
    assert set(fixture["request"]) == {"timeout_seconds"}
    answer = parse_wait(fixture["response"])
    assert answer.status == fixture["response"]["status"]


async def test_outcome_trace_and_abandon_requests_match_the_fixtures(gw, cp):
    from roster_gateway.client import ControlPlaneClient

    client: ControlPlaneClient = gw.client
    await client.outcome("dc_x", 200, 10, 2048, "")
    batch = FIXTURES["outcomes"]["request"]["outcomes"]
    assert await client.outcomes(batch) == ["ok", "ok"]
    await client.trace("dc_x", b"{}")
    await client.abandon("ap_x")
    sent = dict((p.rsplit("/", 1)[-1], b) for p, b in cp.calls)
    assert set(sent["outcome"]) == set(FIXTURES["outcome"]["request"])
    assert sent["outcomes"] == FIXTURES["outcomes"]["request"]
    # What the addon queues has exactly an outcome's fields, a scrubbed count included.
    gw.steps.report("dc_y", 200, 10, 2048, "")
    await asyncio.sleep(0.05)
    assert set(cp.bodies("/outcomes")[-1]["outcomes"][0]) == set(FIXTURES["outcome"]["request"])
    assert cp.bodies("/outcomes")[-1]["outcomes"][0]["scrubbed"] == 0
    scrubbed = FIXTURES["outcome_scrubbed"]["request"]
    gw.steps.report("dc_z", 200, 10, 2048, "", scrubbed["scrubbed"])
    await asyncio.sleep(0.05)
    queued = cp.bodies("/outcomes")[-1]["outcomes"][0]
    assert set(queued) == set(scrubbed) and queued["scrubbed"] == scrubbed["scrubbed"] > 0
    metered = FIXTURES["outcome_usage"]["request"]
    gw.steps.report("dc_u", 200, 10, 2048, "", 0, metered["usage"])
    await asyncio.sleep(0.05)
    queued = cp.bodies("/outcomes")[-1]["outcomes"][0]
    assert set(queued) == set(metered) and set(queued["usage"]) == set(metered["usage"])
    # What the meter reports: the cache-write counts only when there are any (older control planes)
    assert set(Usage(known=True, cache_write=2, cache_write_1h=1).as_wire()) == set(metered["usage"])
    assert set(Usage(known=True).as_wire()) == set(metered["usage"]) - {"cache_write", "cache_write_1h"}
    assert set(sent["trace"]) == set(FIXTURES["trace"]["request"])
    assert sent["abandon"] == (FIXTURES["abandon"]["request"] or {})


def test_tripwire_fixture_is_a_tripwire_deny_without_secrets():
    answer = FIXTURES["decide_deny_tripwire"]["response"]
    decision = parse_decision(answer)
    assert decision.reason == "tripwire" and not decision.inject and not decision.replace


def test_refusal_comment_is_parsed_and_optional():
    answer = parse_wait(FIXTURES["wait_refused_comment"]["response"])
    assert answer.decision.comment == "not during the release freeze"
    older = dict(FIXTURES["wait_refused"]["response"])
    older.pop("comment")  # a control plane from before comments existed
    assert parse_wait(older).decision.comment is None


async def test_held_request_refused_with_a_comment_returns_it_to_the_box(gw, cp):
    cp.decide = FIXTURES["decide_ask"]["response"]
    cp.waits = [FIXTURES["wait_refused_comment"]["response"]]
    flow = make_flow(host="93.184.216.34", token="rt_fixture")
    gw.requestheaders(flow)
    await gw.request(flow)
    body = json.loads(flow.response.content)
    assert flow.response.status_code == 403
    assert body["reason"] == "approval_refused"
    assert body["comment"] == "not during the release freeze"
    assert body["message"].endswith(": not during the release freeze")


async def test_a_model_host_refusal_reaches_the_box_in_its_providers_shape(gw, cp):
    fixture = FIXTURES["decide_deny_model_host"]
    cp.decide = fixture["response"]
    flow = make_flow(host="93.184.216.34", token="rt_fixture", path=fixture["request"]["path"])
    gw.requestheaders(flow)
    await gw.request(flow)
    body = json.loads(flow.response.content)
    assert body["type"] == "error" and body["error"]["type"] == "roster_no_grant"
    assert fixture["response"]["message"] in body["error"]["message"]
    assert (body["verdict"], body["reason"]) == ("deny", "no_grant")
    assert flow.response.headers["x-should-retry"] == "false"
