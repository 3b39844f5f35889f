"""The request path through the addon: identity, decide, allow/deny/ask, secrets, outcomes, failures."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.conftest import PUBLIC_IP, allow, ask, deny, make_flow


async def run_request(gw, flow):
    gw.requestheaders(flow)
    await gw.request(flow)
    return flow


def answer(flow) -> dict:
    assert flow.response is not None, "expected the gateway to answer"
    return json.loads(flow.response.content)


def reported(cp) -> list[dict]:
    """Every outcome the gateway reported, in order (it sends them in batches to /outcomes)."""
    return [o for body in cp.bodies("/outcomes") for o in body["outcomes"]]


async def settle(gw):
    await asyncio.sleep(0)
    if gw.background:
        await asyncio.gather(*list(gw.background))


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


async def test_outcome_reported_after_response_without_blocking(gw, cp):
    flow = make_flow(content=b"hello")
    await run_request(gw, flow)
    from mitmproxy.test import tutils

    flow.response = tutils.tresp(content=b"x" * 42)
    gw.response(flow)
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome == {"decision_id": "dc_1", "status": 200, "request_bytes": 5, "response_bytes": 42,
                       "error": "", "scrubbed": 0}


async def test_upstream_error_reports_outcome_with_error(gw, cp):
    from mitmproxy import flow as mflow

    flow = make_flow()
    await run_request(gw, flow)
    flow.error = mflow.Error("connection refused")
    gw.error(flow)
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["status"] == 502 and outcome["error"] == "connection refused"


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


async def test_ask_then_approved_forwards_with_the_returned_decision(gw, cp):
    cp.decide = ask()
    cp.waits = [{"status": "pending", "decision": None},
                {"status": "approved", "decision": allow(decision_id="dc_ok", inject=[
                    {"header": "authorization", "value": "Bearer REAL"}])}]
    flow = await run_request(gw, make_flow())
    assert flow.response is None
    assert flow.request.headers["authorization"] == "Bearer REAL"
    assert flow.metadata["roster_decision_id"] == "dc_ok"
    assert len(cp.bodies("/wait")) == 2


async def test_ask_then_refused(gw, cp):
    cp.decide = ask()
    cp.waits = [{"status": "refused", "decision": deny("approval_refused")}]
    flow = await run_request(gw, make_flow())
    assert flow.response.status_code == 403 and answer(flow)["reason"] == "approval_refused"


async def test_ask_then_hold_expires_and_abandons(gw, cp):
    cp.decide = ask(hold=1)
    start = time.monotonic()
    flow = await run_request(gw, make_flow())
    assert 0.9 < time.monotonic() - start < 2.0
    assert flow.response.status_code == 403 and answer(flow)["reason"] == "approval_expired"
    await settle(gw)
    assert any(p.endswith("/approvals/ap_1/abandon") for p in cp.paths())


async def test_ask_hold_is_capped_by_the_gateway_option(gw, cp):
    cp.decide = ask(hold=3600)  # the gateway holds at most roster_hold_seconds (2 in these tests)
    start = time.monotonic()
    flow = await run_request(gw, make_flow())
    assert time.monotonic() - start < 3.0
    assert answer(flow)["reason"] == "approval_expired"


async def test_a_held_request_does_not_stall_other_flows(gw, cp):
    def by_path(body):
        return ask(hold=2) if body["path"] == "/slow" else allow()

    cp.decide = by_path
    held = asyncio.create_task(run_request(gw, make_flow(path="/slow")))
    await asyncio.sleep(0.05)
    start = time.monotonic()
    quick = await run_request(gw, make_flow(path="/fast"))
    assert quick.response is None and time.monotonic() - start < 0.2
    assert not held.done()
    held.cancel()


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


async def test_next_decision_of_a_run_does_not_wait_for_its_outcome(gw, cp):
    """The control plane raises taint when it allows, so a slow outcome holds nothing up."""
    from mitmproxy.test import tutils

    order: list[str] = []
    real_handle = cp.handle

    async def handle(method, path, body):
        if path.endswith("/outcomes"):
            await asyncio.sleep(0.3)
        order.append(path.rsplit("/", 1)[-1])
        return await real_handle(method, path, body)

    cp.handle = handle
    first = await run_request(gw, make_flow())
    first.response = tutils.tresp()
    gw.response(first)
    start = time.monotonic()
    second = await run_request(gw, make_flow())
    assert second.response is None and time.monotonic() - start < 0.25
    await settle(gw)
    assert order == ["decide", "decide", "outcomes"]


async def test_outcomes_are_batched_one_request_in_flight(gw, cp):
    from mitmproxy.test import tutils

    in_flight = peak = 0
    real_handle = cp.handle

    async def handle(method, path, body):
        nonlocal in_flight, peak
        if path.endswith("/outcomes"):
            cp.calls.append((path, body))
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.05)
            in_flight -= 1
            return 200, {"results": ["ok"] * len(body["outcomes"])}
        return await real_handle(method, path, body)

    cp.handle = handle
    for i in range(5):
        cp.decide = allow(decision_id=f"dc_{i}")
        flow = await run_request(gw, make_flow())
        flow.response = tutils.tresp()
        gw.response(flow)
    await settle(gw)
    assert [o["decision_id"] for o in reported(cp)] == [f"dc_{i}" for i in range(5)]
    assert len(cp.bodies("/outcomes")) == 1 and peak == 1


async def test_outcome_batches_respect_the_maximum(gw, cp):
    gw.tctx.configure(gw, roster_outcome_batch_max=2)
    for i in range(5):
        gw._report(f"dc_{i}", 200, 1, 1, "")
    await settle(gw)
    assert [len(b["outcomes"]) for b in cp.bodies("/outcomes")] == [2, 2, 1]
    assert [o["decision_id"] for o in reported(cp)] == [f"dc_{i}" for i in range(5)]


async def test_outcome_report_failure_is_logged_not_raised(gw, cp, caplog):
    cp.fail_status = 500
    gw._report("dc_lost", 200, 1, 1, "")
    await settle(gw)
    assert "1 outcome(s) not reported" in caplog.text
    cp.fail_status = None
    gw._report("dc_next", 200, 1, 1, "")  # the reporter carries on after a failure
    await settle(gw)
    assert reported(cp)[-1]["decision_id"] == "dc_next"
