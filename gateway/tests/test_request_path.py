"""The request path (request_path.py, through the addon): identity, decide, allow/deny/ask, secrets,
trace, failures."""

from __future__ import annotations

import time

import pytest

from tests.conftest import PUBLIC_IP, allow, answer, deny, make_flow, reported, run_request, settle


async def test_allow_forwards_to_the_vetted_ip_with_secrets_and_no_proxy_credentials(gw, cp):
    cp.decide = allow(inject=[{"header": "authorization", "value": "Bearer REAL-KEY"}],
                      replace=[{"sentinel": "sk-roster-SENTINEL", "value": "REAL-OTHER"}])
    flow = make_flow(headers=[("x-api-key", "pre sk-roster-SENTINEL post")])
    await run_request(gw, flow)
    assert flow.response is None
    req = flow.request
    assert req.headers["authorization"] == "Bearer REAL-KEY"
    assert req.headers["x-api-key"] == "pre REAL-OTHER post"
    assert "proxy-authorization" not in req.headers
    assert req.host == PUBLIC_IP and req.host_header == PUBLIC_IP
    sent = cp.bodies("/decide")[0]
    assert sent["token"] == "rt_good"
    assert sent["method"] == "GET" and sent["scheme"] == "http" and sent["port"] == 80
    assert all(name != "proxy-authorization" for name, _ in sent["headers"])
    assert flow.metadata["roster_decision_id"] == "dc_1"


DENIALS = [
    ("no_grant", deny("no_grant"), 403),
    ("grant_expired", deny("grant_expired"), 403),
    ("taint_too_high", deny("taint_too_high"), 403),
    ("denied_by_grant", deny("denied_by_grant"), 403),
    ("policy_error", deny("policy_error", 503), 503),
    ("bad_token", deny("bad_token", 407), 407),
    ("odd status becomes 403", deny("no_grant", 200), 403),
]


@pytest.mark.parametrize("name,decision,status", DENIALS, ids=[d[0] for d in DENIALS])
async def test_denials_are_legible_json_and_nothing_forwarded(gw, cp, name, decision, status):
    cp.decide = decision
    flow = make_flow()
    await run_request(gw, flow)
    body = answer(flow)
    assert flow.response.status_code == status
    assert body["verdict"] == "deny" and body["reason"] == decision["reason"]
    assert flow.response.headers["content-type"] == "application/json"
    assert flow.request.host == PUBLIC_IP  # untouched; the response short-circuits the upstream
    if status == 407:
        assert flow.response.headers["proxy-authenticate"].startswith("Basic")


async def test_over_budget_is_402_with_the_cap(gw, cp):
    budget = {"scope": "worker:alpha", "unit": "requests", "window": "day", "limit": 10, "spent": 10}
    cp.decide = deny("over_budget", 402, budget=budget)
    flow = await run_request(gw, make_flow())
    assert flow.response.status_code == 402
    assert answer(flow)["budget"] == budget


@pytest.mark.parametrize("token", [None, ""], ids=["no header", "empty password"])
async def test_missing_token_is_407_even_if_the_control_plane_allowed(gw, cp, token):
    cp.decide = allow()  # a broken control plane must not open the door
    flow = await run_request(gw, make_flow(token=token))
    assert flow.response.status_code == 407
    assert answer(flow)["reason"] == "bad_token"
    assert cp.bodies("/decide")[0]["token"] == ""


async def test_bearer_proxy_authorization_is_accepted(gw, cp):
    flow = make_flow(token=None, headers=[("Proxy-Authorization", "Bearer rt_bearer")])
    await run_request(gw, flow)
    assert cp.bodies("/decide")[0]["token"] == "rt_bearer"
    assert "proxy-authorization" not in flow.request.headers


FAILURES = [
    ("unreachable", dict(fail_status=None, delay=0.0, decide="raise")),
    ("http 500", dict(fail_status=500)),
    ("http 401", dict(fail_status=401)),
    ("slower than the timeout", dict(delay=1.0)),
    ("garbage verdict", dict(decide={"verdict": "maybe"})),
    ("deny without reason", dict(decide={"verdict": "deny", "reason": None, "status": 403})),
    ("deny carrying a secret", dict(decide=deny("no_grant", inject=[{"header": "a", "value": "b"}]))),
    ("allow without decision id", dict(decide=allow(decision_id=""))),
]


@pytest.mark.parametrize("name,setup", FAILURES, ids=[f[0] for f in FAILURES])
async def test_control_plane_failure_denies_503_promptly(gw, cp, name, setup):
    for key, value in setup.items():
        if value == "raise":
            def broken(_body):
                raise ConnectionError("refused")
            cp.decide = broken
        else:
            setattr(cp, key, value)
    start = time.monotonic()
    try:
        flow = await run_request(gw, make_flow())
    except ConnectionError:
        pytest.fail("a control-plane failure leaked out of the hook")
    elapsed = time.monotonic() - start
    assert flow.response.status_code == 503
    assert answer(flow)["reason"] == "control_plane_unavailable"
    assert elapsed < 0.3 + 0.2, f"took {elapsed:.3f}s for a 300 ms timeout"


async def test_trace_stores_the_exact_body_before_forwarding(gw, cp):
    import base64

    cp.decide = allow(trace=True)
    body = b'\x00\xff{"messages": [1, 2]}'  # not JSON-shaped: a '{'-led body must parse as JSON (mcp.py)
    flow = await run_request(gw, make_flow(method="POST", content=body,
                                           headers=[("content-type", "application/octet-stream")]))
    assert flow.response is None
    [trace] = cp.bodies("/trace")
    assert base64.b64decode(trace["body_b64"]) == body and trace["decision_id"] == "dc_1"


async def test_trace_failure_denies_and_settles(gw, cp):
    cp.decide = allow(trace=True)
    cp.trace_status = 500
    flow = await run_request(gw, make_flow(method="POST", content=b"{}",
                                           headers=[("content-type", "application/json")]))
    assert flow.response.status_code == 503 and answer(flow)["reason"] == "trace_failed"
    await settle(gw)
    assert reported(cp)[0]["error"] == "trace_failed"


async def test_deny_message_never_contains_injected_values(gw, cp):
    cp.decide = allow(inject=[{"header": "authorization", "value": "Bearer SECRET-VALUE"}])
    flow = await run_request(gw, make_flow(host="127.0.0.1"))  # loopback: refused after the allow
    assert flow.response.status_code == 403
    assert b"SECRET-VALUE" not in flow.response.content
    assert "authorization" not in flow.request.headers
