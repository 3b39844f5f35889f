"""What keeps a streamed response cheap without weakening it: the scrubber re-reads only what was sent
after the last separator (unescape.SEPARATORS), yet an escaped echo split anywhere is still caught; near
an escape it holds back only what follows the last separator; the meter parses only the events that can
carry usage, yet reads usage however it is spelled; the SSE splitter finds the same events as the
pattern it stands for, however the stream is cut."""

from __future__ import annotations

import json
import random

import pytest
from roster_gateway.metering import ResponseMeter
from roster_gateway.model_calls import CHAT, MESSAGES, ModelCall, ask_for_stream_usage, model_call_of
from roster_gateway.scrub import scrubber_for
from roster_gateway.streaming import ResponseStream, StreamScrubber
from roster_gateway.usage import _EVENT_END, SseSplitter

from tests import model_shapes as m

SENTINEL = "sk-roster-SENTINELsentinelSENTINEL01"
REAL = "real-key-Zq8vP3kL0xW9mN4tRr77"
# A value holding separators: they are then no bound for its readings.
REAL_WITH_SEPARATORS = 'pw:"a, b" [c](d) <e>'


def _stream(real: str = REAL) -> ResponseStream:
    return ResponseStream(None, StreamScrubber(scrubber_for([(SENTINEL, real)], [("x-key", real)])))


def _run(stream: ResponseStream, pieces: list[bytes]) -> bytes:
    return b"".join(b"".join(stream(piece)) for piece in [*pieces, b""])


def _json_escaped(value: str) -> bytes:
    return "".join(f"\\u{ord(c):04x}" for c in value).encode()


CHATTER = b'data: {"a":"x, y: [z] (w) <v>","b":"line\\n"}\n\n' * 30


def test_an_escaped_echo_after_many_separators_is_caught_wherever_the_stream_is_cut():
    escaped = _json_escaped(REAL)
    body = CHATTER + b'data: {"echo": "' + escaped + b'"}\n\n'
    for cut in range(len(CHATTER) - 40, len(body)):
        stream = _stream()
        out = _run(stream, [body[:cut], body[cut:], b"data: after\n\n"])
        assert stream.scrubber.failed, cut
        assert escaped not in out and b"after" not in out


def test_an_echo_escaped_in_pieces_of_three_is_caught():
    escaped = _json_escaped(REAL)
    body = CHATTER + b'data: {"echo": "' + escaped + b'"}\n\n'
    stream = _stream()
    out = _run(stream, [body[i:i + 3] for i in range(0, len(body), 3)])
    assert stream.scrubber.failed and escaped not in out


def test_a_value_holding_separators_is_read_across_them():
    """Partly escaped, its own separators left as they are: the re-read is not bounded by them."""
    echo = "".join(f"\\u{ord(c):04x}" if c.isalpha() else c for c in REAL_WITH_SEPARATORS).encode()
    body = CHATTER + b"data: " + echo + b"\n\n"
    for cut in range(len(CHATTER), len(body), 2):
        stream = _stream(REAL_WITH_SEPARATORS)
        out = _run(stream, [body[:cut], body[cut:]])
        assert stream.scrubber.failed, cut
        assert echo not in out


def test_an_event_whose_escape_a_separator_follows_goes_on_whole():
    stream = StreamScrubber(scrubber_for([(SENTINEL, REAL)], [("x-key", REAL)]))
    event = b'data: {"content":"line\\n","n":1}\n\n'
    assert stream.feed(event) == event
    # An escape after the last separator may begin an escaped echo: held from that separator on.
    assert stream.feed(b'data: {"content":"\\u0072') == b'data: {"content":"'
    assert stream.feed(b'ock"}\n\n') == b'\\u0072ock"}\n\n'


def test_with_nul_bytes_the_whole_window_is_read_again():
    """UTF-16 readings are not bounded by separators: U+2222 is the bytes `""` in UTF-16, so an echo of a
    value holding it, in UTF-16 and split across pieces, holds separator bytes and is still caught."""
    real = "key-\u2222\u2222-Zq8vP3kL0xW9mN4t"
    utf16 = real.encode("utf-16-le")
    assert b'"' in utf16 and '"' not in real
    body = b'data: "x", ' + utf16 + b"\n\n"
    for cut in range(8, len(body) - 2, 3):
        stream = _stream(real)
        out = _run(stream, [body[:cut], body[cut:]])
        assert stream.scrubber.failed and utf16 not in out, cut


def _call(api):
    return ModelCall(api=api, model="req-model", stream=True, max_output_tokens=None, choices=1,
                     input_estimate=100, asked_for_usage=False)


def _meter(api, body, piece=7, strip=False):
    meter = ResponseMeter(_call(api), content_type="text/event-stream", status=200, strip_usage_chunk=strip)
    out = b"".join(meter.feed(body[i:i + piece]) for i in range(0, len(body), piece)) + meter.feed(b"")
    return meter.result(), out


def test_usage_is_read_however_its_key_is_spelled():
    body = m.chat_sse(prompt=70, completion=3, cached=64)
    escaped = body.replace(b'"usage":{', b'"\\u0075sage":{')
    assert escaped != body
    usage, out = _meter(CHAT, escaped)
    assert usage.known and (usage.input, usage.cached_input, usage.output) == (70, 64, 3) and out == escaped
    spaced = body.replace(b'"usage":{', b'"usage" : {')
    usage, _ = _meter(CHAT, spaced)
    assert usage.known and usage.input == 70


def test_the_added_usage_chunk_is_removed_when_every_other_chunk_says_usage_null():
    body = m.chat_sse(prompt=12, completion=3)
    assert body.count(b'"usage":null') >= 4
    usage, out = _meter(CHAT, body, piece=5, strip=True)
    assert usage.known and usage.input == 12 and b'"prompt_tokens"' not in out and b'"usage":null' in out


def test_an_escaped_message_delta_is_read():
    body = m.anthropic_sse(input=25, output=15, cache_read=4000)
    escaped = body.replace(b'"message_delta"', b'"message\\u005fdelta"')
    assert escaped != body
    usage, _ = _meter(MESSAGES, escaped)
    assert usage.known and usage.output == 15


def test_a_malformed_event_that_cannot_carry_usage_does_not_hide_the_usage():
    """Only events that can carry usage are parsed: a broken content event passes, unread, and the usage
    that follows is still read. A first event that is not JSON is malformed (the stream is not JSON)."""
    body = m.chat_sse(prompt=9, completion=2)
    first_end = body.index(b"\n\n") + 2
    broken = body[:first_end] + b"data: {not json\n\n" + body[first_end:]
    usage, out = _meter(CHAT, broken)
    assert usage.known and usage.input == 9 and out == broken
    usage, _ = _meter(CHAT, b"data: {not json\n\n" + body)
    assert not usage.known and "malformed" in usage.problem


def _reference_events(stream: bytes) -> tuple[list[bytes], bytes]:
    events, start = [], 0
    for match in _EVENT_END.finditer(stream):
        events.append(stream[start:match.end()])
        start = match.end()
    return events, stream[start:]


@pytest.mark.parametrize("seed", range(40))
def test_the_splitter_finds_the_events_the_pattern_finds_however_the_stream_is_cut(seed):
    rng = random.Random(seed)
    stream = bytes(rng.choice(b"ab:\n\n\r") for _ in range(rng.randint(0, 300)))
    splitter, events, at = SseSplitter(), [], 0
    while at < len(stream):
        size = rng.randint(1, 9)
        events += splitter.feed(stream[at:at + size])
        at += size
    expected, rest = _reference_events(stream)
    # A lone CR at the very end may yet become CRLF: both keep it pending.
    assert events == expected and splitter.take_rest() == rest


def test_json_events_are_unchanged_by_the_meter():
    events = [b"data: " + json.dumps({"choices": [{"delta": {"content": f"t{i}"}}], "usage": None},
                                     separators=(",", ":")).encode() + b"\n\n" for i in range(50)]
    body = b"".join(events)
    usage, out = _meter(CHAT, body, piece=13, strip=True)
    assert out == body and not usage.known and "cut off" in usage.problem


@pytest.mark.parametrize("spelling", [b'"stream_options"', b'"stream\\u005foptions"'])
def test_a_box_cannot_keep_usage_off_by_how_it_spells_stream_options(spelling):
    """The option is inserted without a second parse only when no member can be named stream_options; a
    spelled-out or escaped one is re-serialised with include_usage on (never a second member)."""
    body = b'{"model":"m","stream":true,' + spelling + b':{"include_usage":false},"messages":[]}'
    call = model_call_of("POST", "/v1/chat/completions", body)
    sent = ask_for_stream_usage(call, body)
    assert sent.count(b"stream_options") == 1
    assert json.loads(sent)["stream_options"] == {"include_usage": True}


def test_without_stream_options_the_option_goes_after_the_brace_every_byte_kept():
    body = b' {"model":"m","stream":true,"messages":[{"role":"user","content":"caf\xc3\xa9"}]}'
    sent = ask_for_stream_usage(model_call_of("POST", "/v1/chat/completions", body), body)
    assert sent == b' {"stream_options":{"include_usage":true},' + body[2:]
