"""What comes back (response_path.py, through the addon): outcomes reported after the response or an
upstream error, and a response that could not be streamed safely is buffered instead."""

from __future__ import annotations

from mitmproxy.test import tutils

from tests.conftest import make_flow, reported, run_request, settle


async def test_outcome_reported_after_response_without_blocking(gw, cp):
    flow = make_flow(content=b"hello")
    await run_request(gw, flow)
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


async def test_a_response_without_a_decision_reports_nothing(gw, cp):
    flow = make_flow()
    flow.response = tutils.tresp(content=b"answered by the gateway itself")
    gw.response(flow)
    await settle(gw)
    assert reported(cp) == [] and flow.response.content == b"answered by the gateway itself"
    flow.metadata["roster_scrubber"] = object()
    flow.response = None  # no response at all: the flow's scrubber (real values) is dropped all the same
    gw.response(flow)
    assert "roster_scrubber" not in flow.metadata


async def test_a_stream_that_cannot_be_set_up_is_buffered(gw, cp, monkeypatch, caplog):
    from roster_gateway import model_flow

    def broken(flow):
        flow.metadata["roster_stream"] = "half set up"
        flow.response.stream = True
        raise RuntimeError("no stream")

    monkeypatch.setattr(model_flow, "on_response_headers", broken)
    flow = make_flow()
    await run_request(gw, flow)
    flow.response = tutils.tresp(content=b"data: {}\n\n")
    gw.responseheaders(flow)
    assert flow.response.stream is False and "roster_stream" not in flow.metadata
    assert "could not stream the response; buffering it" in caplog.text
