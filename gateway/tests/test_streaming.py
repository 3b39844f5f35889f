"""Streaming: an echo of the injected secret split at any point across the upstream's pieces still
reaches the box as its sentinel, while only `longest form - 1` bytes are ever held back; a stream that
cannot be scrubbed is cut; the usage chunk the gateway asked for is removed; nothing empty is sent."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest
from mitmproxy.test import tflow, tutils
from roster_gateway.metering import ResponseMeter
from roster_gateway.model_calls import CHAT, ModelCall
from roster_gateway.scrub import Unscrubbable, scrubber_for
from roster_gateway.streaming import ResponseStream, StreamScrubber, start_stream, streamable

from tests import model_shapes as m

SENTINEL = "sk-roster-SENTINELsentinelSENTINEL01"
REAL = "real-key-Zq8vP3kL0xW9mN4tRr77"


def _scrubber():
    return scrubber_for([(SENTINEL, REAL)], [("authorization", f"Bearer {REAL}")])


def _run(stream: ResponseStream, pieces: list[bytes]) -> tuple[bytes, list[bytes]]:
    sent = []
    for piece in [*pieces, b""]:
        out = stream(piece)
        assert all(out), "an empty piece would end a chunked response"
        sent += out
    return b"".join(sent), sent


FORMS = [REAL.encode(), base64.b64encode(REAL.encode()), quote(f"Bearer {REAL}", safe="").encode(),
         f"Bearer {REAL}".encode()]


@pytest.mark.parametrize("form", FORMS, ids=["plain", "base64", "percent", "header"])
def test_echo_split_anywhere_is_scrubbed(form):
    body = b"data: {\"echo\": \"" + form + b"\"}\n\n" + b"data: more\n\n"
    for cut in range(1, len(body)):
        stream = ResponseStream(None, StreamScrubber(_scrubber()))
        out, _ = _run(stream, [body[:cut], body[cut:]])
        assert REAL.encode() not in out and form not in out
        assert stream.scrubber.count == 1


def test_only_a_possible_beginning_of_a_form_is_held_back():
    scrubber = _scrubber()
    stream = StreamScrubber(scrubber)
    assert stream.feed(b"data: hello\n\n") == b"data: hello\n\n"  # a whole event goes on at once
    held = REAL[:12].encode()
    assert stream.feed(b"data: " + held) == b"data: "  # could be the secret arriving: held
    assert stream.feed(b"-not-it\n\n") == held + b"-not-it\n\n"
    assert stream.feed(b"x" * 1000 + REAL[:5].encode(), end=True) == b"x" * 1000 + REAL[:5].encode()
    assert len(REAL) < scrubber.longest_form


def test_near_an_escape_the_whole_window_is_held():
    scrubber = _scrubber()
    stream = StreamScrubber(scrubber)
    data = b"data: " + b"y" * 200 + b'\\u0072'
    out = stream.feed(data)
    assert out == data[:len(data) - (scrubber.longest_form - 1)]


def test_without_a_secret_nothing_is_held():
    stream = ResponseStream(None, None)
    assert stream(b"data: 1\n\n") == [b"data: 1\n\n"] and stream(b"") == []


class _Stuck:
    longest_form = 4
    forms = frozenset({b"abcd"})

    def scrub(self, data):
        raise Unscrubbable("echoes remain")


def test_an_unscrubbable_stream_is_cut():
    stream = StreamScrubber(_Stuck())
    assert stream.feed(b"data: 1\n\n") == b"" and stream.failed
    assert stream.feed(b"more", end=True) == b""


def test_usage_chunk_removed_and_metered_while_scrubbing():
    call = ModelCall(api=CHAT, model="m", stream=True, max_output_tokens=None, choices=1, input_estimate=9,
                     asked_for_usage=False)
    meter = ResponseMeter(call, content_type="text/event-stream", status=200, strip_usage_chunk=True)
    stream = ResponseStream(meter, StreamScrubber(_scrubber()))
    upstream = m.chat_sse(prompt=40, completion=2)
    out, pieces = _run(stream, [upstream[i:i + 17] for i in range(0, len(upstream), 17)])
    assert b'"choices":[]' not in out and out.endswith(b"data: [DONE]\n\n") and len(pieces) > 3
    assert meter.result().input == 40 and stream.upstream_bytes == len(upstream)


def _flow(content_type="text/event-stream", **headers):
    flow = tflow.tflow(resp=tutils.tresp(headers=[(b"content-type", content_type.encode())]))
    for name, value in headers.items():
        flow.response.headers[name.replace("_", "-")] = value
    return flow


@pytest.mark.parametrize("headers,expected", [
    ({}, True),
    ({"content_encoding": "gzip"}, False),
    ({"content_range": "bytes 0-1/2"}, False),
    ({"transfer_encoding": "gzip, chunked"}, False),
])
def test_only_identity_sse_is_streamed(headers, expected):
    assert streamable(_flow(**headers)) is expected
    assert streamable(_flow("application/json")) is False


def test_headers_scrubbed_before_they_go_out():
    flow = _flow(x_echo=f"Bearer {REAL}")
    stream = start_stream(flow, None, _scrubber())
    assert flow.response.headers["x-echo"] == f"Bearer {SENTINEL}" and stream.scrubber.count == 1
    assert flow.response.stream is stream


def _every_char_escaped(value: str, style: str) -> bytes:
    if style == "json":
        return "".join(f"\\u{ord(c):04x}" for c in value).encode()
    if style == "html":
        return "".join(f"&#{ord(c)};" for c in value).encode()
    return "".join(f"&#x{ord(c):x};" if i % 2 else f"\\u{ord(c):04x}" for i, c in enumerate(value)).encode()


@pytest.mark.parametrize("style", ["json", "html", "mixed"])
def test_an_echo_escaped_character_by_character_cuts_the_stream(style):
    """No fixed form to hold back for: the reading of what arrived (with the recent tail already sent) shows
    the real value, so the stream is cut before the piece that completes it goes on."""
    escaped = _every_char_escaped(REAL, style)
    body = b"data: {\"echo\": \"" + escaped + b"\"}\n\n"
    for cut in (1, len(body) // 3, len(body) // 2, len(body) - 5):
        stream = ResponseStream(None, StreamScrubber(_scrubber()))
        out, _ = _run(stream, [body[:cut], body[cut:], b"data: after\n\n"])
        assert stream.scrubber.failed
        assert escaped not in out and b"after" not in out
