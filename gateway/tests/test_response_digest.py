"""The outcome's response_sha256 (docs/wire.md, POST /outcome): the digest of the response body as the
upstream sent it, buffered or streamed (hashed piece by piece, before the usage chunk the gateway asked
for is removed or an echo scrubbed), sent only to a control plane whose health answer names the field."""

from __future__ import annotations

import gzip
import hashlib

from mitmproxy.test import tutils
from roster_gateway.metering import ResponseMeter
from roster_gateway.model_calls import CHAT, ModelCall
from roster_gateway.scrub import scrubber_for
from roster_gateway.streaming import ResponseStream, StreamScrubber

from tests import model_shapes as m
from tests.conftest import allow, make_flow, reported, run_request, settle

SENTINEL = "sk-roster-SENTINELsentinelSENTINEL01"
REAL = "real-key-Zq8vP3kL0xW9mN4tRr77"


async def _knows_the_field(gw) -> None:
    answered, _limits = await gw.client.health(1)
    assert answered and gw.client.outcome_fields == {"response_sha256"}


async def test_a_buffered_response_reports_the_digest_of_its_body(gw, cp):
    await _knows_the_field(gw)
    flow = await run_request(gw, make_flow())
    flow.response = tutils.tresp(content=b"x" * 42)
    gw.response(flow)
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["response_sha256"] == hashlib.sha256(b"x" * 42).hexdigest()
    assert outcome["response_bytes"] == 42


async def test_the_digest_is_of_the_bytes_received_still_encoded_and_before_scrubbing(gw, cp):
    """The upstream echoed the injected secret: the box gets the sentinel, the digest is of what came."""
    cp.decide = allow(inject=[{"header": "authorization", "value": f"Bearer {REAL}"}],
                      replace=[{"sentinel": SENTINEL, "value": REAL}])
    await _knows_the_field(gw)
    flow = await run_request(gw, make_flow())
    body = gzip.compress(f'{{"echo": "{REAL}"}}'.encode())
    flow.response = tutils.tresp(content=b"")
    flow.response.headers["content-encoding"] = "gzip"
    flow.response.raw_content = body
    gw.response(flow)
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["response_sha256"] == hashlib.sha256(body).hexdigest()
    assert REAL.encode() not in (flow.response.content or b"")


async def test_a_streamed_response_reports_the_digest_of_every_piece_as_it_came(gw, cp):
    await _knows_the_field(gw)
    flow = await run_request(gw, make_flow())
    flow.response = tutils.tresp(content=b"", headers=[(b"content-type", b"text/event-stream")])
    gw.responseheaders(flow)
    stream = flow.response.stream
    assert callable(stream), "an allowed event stream is streamed"
    upstream = b"".join(f"data: {{\"n\": {i}}}\n\n".encode() for i in range(50))
    for at in range(0, len(upstream), 13):
        stream(upstream[at:at + 13])
    stream(b"")
    gw.response(flow)
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["response_sha256"] == hashlib.sha256(upstream).hexdigest()
    assert outcome["response_bytes"] == len(upstream)


def test_the_stream_digest_covers_the_usage_chunk_the_box_never_sees():
    call = ModelCall(api=CHAT, model="m", stream=True, max_output_tokens=None, choices=1, input_estimate=9,
                     asked_for_usage=False)
    meter = ResponseMeter(call, content_type="text/event-stream", status=200, strip_usage_chunk=True)
    stream = ResponseStream(meter, StreamScrubber(scrubber_for([(SENTINEL, REAL)], [])))
    upstream = m.chat_sse(prompt=40, completion=2)
    sent = b"".join(b"".join(stream(upstream[i:i + 17])) for i in range(0, len(upstream), 17))
    sent += b"".join(stream(b""))
    assert sent != upstream  # the usage chunk was removed on the way to the box
    assert stream.upstream_sha256.hexdigest() == hashlib.sha256(upstream).hexdigest()


async def test_no_digest_for_a_control_plane_that_does_not_name_the_field(gw, cp):
    """An older control plane (strict outcomes) would refuse the whole batch over an unknown field."""
    cp.health[1].pop("outcome_fields")
    answered, _ = await gw.client.health(1)
    assert answered and gw.client.outcome_fields == frozenset()
    flow = await run_request(gw, make_flow())
    flow.response = tutils.tresp(content=b"hello")
    gw.response(flow)
    await settle(gw)
    [outcome] = reported(cp)
    assert "response_sha256" not in outcome


async def test_a_health_answer_naming_unknown_or_malformed_fields_names_none_of_them(gw, cp):
    for fields in (["something_else"], "response_sha256", [7, None], {"response_sha256": True}):
        cp.health[1]["outcome_fields"] = fields
        answered, _ = await gw.client.health(1)
        assert answered and gw.client.outcome_fields == frozenset(), fields


async def test_before_any_health_answer_no_digest_is_sent(gw, cp):
    flow = await run_request(gw, make_flow())
    flow.response = tutils.tresp(content=b"hello")
    gw.response(flow)
    await settle(gw)
    [outcome] = reported(cp)
    assert "response_sha256" not in outcome
