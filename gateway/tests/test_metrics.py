"""The gateway's Prometheus metrics: each hook counts what it decided, label values stay bounded (verdicts
and fixed reasons, never a host, path, token or secret), and /metrics serves them on the loopback health
endpoint in the text format Prometheus parses."""

from __future__ import annotations

import asyncio

import pytest
from mitmproxy import flow as mflow
from mitmproxy.test import tutils
from prometheus_client.parser import text_string_to_metric_families
from roster_gateway import metrics
from roster_gateway.health import HealthServer

from tests.conftest import allow, ask, deny, make_flow, run_request, settle
from tests.support_ports import free_port

REAL = "rk-REAL-value-0123456789"


def value(name: str, **labels) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


class Delta:
    """Counters are process-wide: tests assert what one scenario added."""

    def __init__(self, *samples: tuple) -> None:
        self._samples = samples
        self._before = [value(name, **labels) for name, labels in samples]

    def __call__(self) -> list[float]:
        return [value(name, **labels) - before for (name, labels), before in zip(self._samples,
                                                                                  self._before, strict=True)]


def requests(verdict: str, reason: str) -> tuple:
    return "roster_gateway_requests_total", {"verdict": verdict, "reason": reason}


async def test_allows_and_denies_are_counted_once_by_verdict_and_bounded_reason(gw, cp):
    delta = Delta(requests("allow", "granted"), requests("deny", "no_grant"), requests("deny", "other"),
                  requests("deny", "bad_token"), ("roster_gateway_decide_seconds_count", {}))
    answers = iter([allow(), deny("no_grant"), deny("no_grant"), deny("made_up_by_a_newer_cp"),
                    deny("bad_token", 407)])
    cp.decide = lambda body: next(answers)
    for path in ("/a", "/b", "/c", "/d"):
        await run_request(gw, make_flow(path=path))
    await run_request(gw, make_flow(token=None))
    assert delta() == [1, 2, 1, 1, 5]


async def test_a_held_request_shows_in_the_gauge_until_it_is_decided(gw, cp):
    cp.decide = ask()
    approved = {"status": "approved", "decision": allow()}
    delta = Delta(("roster_gateway_holds_total", {"result": "approved"}), requests("allow", "granted"))
    held = asyncio.create_task(run_request(gw, make_flow()))
    for _ in range(50):
        await asyncio.sleep(0.01)
        if cp.bodies("/wait"):
            break
    assert value("roster_gateway_held_requests") == 1
    cp.waits.append(approved)
    await asyncio.wait_for(held, 2)
    assert value("roster_gateway_held_requests") == 0
    assert delta() == [1, 1]


async def test_a_refused_hold_counts_as_refused_and_as_a_deny(gw, cp):
    cp.decide = ask()
    cp.waits = [{"status": "refused", "decision": deny("approval_refused")}]
    delta = Delta(("roster_gateway_holds_total", {"result": "refused"}), requests("deny", "approval_refused"))
    await run_request(gw, make_flow())
    assert delta() == [1, 1] and value("roster_gateway_held_requests") == 0


async def test_upstream_errors_scrubbed_echoes_and_outcome_batches(gw, cp):
    delta = Delta(("roster_gateway_upstream_errors_total", {}), ("roster_gateway_scrubbed_echoes_total", {}),
                  ("roster_gateway_outcome_batch_size_count", {}),
                  ("roster_gateway_outcome_batch_size_sum", {}))
    cp.decide = allow(inject=[{"header": "authorization", "value": f"Bearer {REAL}"}])
    echoed = await run_request(gw, make_flow(path="/echo"))
    echoed.response = tutils.tresp(content=f"you sent Bearer {REAL} and Bearer {REAL}".encode())
    gw.response(echoed)
    assert REAL.encode() not in echoed.response.content
    failed = await run_request(gw, make_flow(path="/down"))
    failed.error = mflow.Error("connection refused")
    gw.error(failed)
    await settle(gw)
    errors, scrubbed, batches, outcomes = delta()
    assert (errors, scrubbed) == (1, 2)
    assert batches >= 1 and outcomes == 2  # both outcomes reported, in one batch or two


async def test_outcomes_the_control_plane_does_not_take_are_counted(gw, cp):
    delta = Delta(("roster_gateway_outcomes_unreported_total", {}))
    flow = await run_request(gw, make_flow())
    cp.fail_status = 500
    flow.response = tutils.tresp(content=b"ok")
    gw.response(flow)
    await settle(gw)
    assert delta() == [1]


async def test_label_values_never_carry_request_details_or_secrets(gw, cp):
    cp.decide = allow(inject=[{"header": "authorization", "value": f"Bearer {REAL}"}])
    flow = await run_request(gw, make_flow(host="93.184.216.34", path="/secret-path?q=1", token="rt_tok"))
    flow.response = tutils.tresp(content=f"Bearer {REAL}".encode())
    gw.response(flow)
    cp.decide = deny("no_grant")
    await run_request(gw, make_flow(path="/other-secret-path"))
    await settle(gw)
    text = metrics.exposition().decode()
    for needle in (REAL, "secret-path", "rt_tok", "93.184.216.34", "dc_1"):
        assert needle not in text
    allowed = {"verdict", "reason", "result", "le"}
    reasons = metrics.KNOWN_REASONS | {metrics.ALLOWED, metrics.OTHER}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert set(sample.labels) <= allowed, sample
            if "reason" in sample.labels:
                assert sample.labels["reason"] in reasons


async def _get(port: int, path: str) -> tuple[int, str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    content_type = next(line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-type:"))
    return int(head.split()[1]), content_type, body


@pytest.mark.parametrize("enabled", [True, False])
async def test_metrics_are_served_on_the_loopback_health_port_or_not_at_all(enabled):
    async def probe(timeout):
        return True

    server = HealthServer(free_port(), probe, cache_seconds=0, probe_timeout=1,
                          metrics=metrics.exposition if enabled else None)
    await server.start()
    try:
        status, content_type, body = await _get(server.port, "/metrics")
        health, _, _ = await _get(server.port, "/healthz")
    finally:
        await server.stop()
    assert health == 200
    if not enabled:
        assert status == 404
        return
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert {"roster_gateway_requests", "roster_gateway_decide_seconds", "roster_gateway_held_requests",
            "roster_gateway_scrubbed_echoes", "roster_gateway_upstream_errors",
            "roster_gateway_outcome_batch_size"} <= names


def test_the_option_turns_metrics_off(tmp_path):
    from tests.test_config_and_health import configure

    assert configure(tmp_path).config.metrics is True
    assert configure(tmp_path, roster_metrics=False).config.metrics is False
