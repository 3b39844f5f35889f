"""Response scrubbing: an upstream echoing an injected secret (in a header, the body, or an encoding of
it) reaches the box with the secret's sentinel instead; an unreadable body is withheld (502)."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import html
import json
import logging
import re
from urllib.parse import quote

import pytest
from mitmproxy.flow import Error as flow_error
from mitmproxy.test import tutils
from roster_gateway.scrub import REDACTED, Scrubber

from tests.conftest import allow, basic, make_flow, reported, run_request, settle

SENTINEL = "sk-proj-SENTINELsentinelSENTINEL0123"
# Has '/', '+', '?', '>', '~' and '=' so that every encoding differs from the plain value.
REAL = "rk/Zq8+vP3?kL0>xW9~=="


def b64(text: str, *, urlsafe: bool = False, pad: bool = True) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    out = encode(text.encode()).decode()
    return out if pad else out.rstrip("=")


def json_escaped(text: str) -> str:
    return json.dumps(text)[1:-1].replace("/", "\\/")


def lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


def unicode_escaped(text: str) -> str:
    return "".join(c if c.isalnum() else f"\\u{ord(c):04x}" for c in text)


SECRETS = {"inject": [{"header": "authorization", "value": f"Bearer {REAL}"}],
           "replace": [{"sentinel": SENTINEL, "value": REAL}]}


async def allowed_flow(gw, cp, decision=None, headers=None):
    cp.decide = decision if decision is not None else allow(**SECRETS)
    flow = make_flow(headers=headers or [])
    await run_request(gw, flow)
    assert flow.response is None, "the request should have been allowed"
    return flow


def respond(gw, flow, *, content: bytes = b"", headers: dict | None = None):
    flow.response = tutils.tresp(content=content, headers=tutils.http.Headers(
        [(k.encode(), v.encode()) for k, v in (headers or {}).items()]))
    if headers and "content-encoding" in {k.lower() for k in headers}:
        flow.response.raw_content = content  # tresp would take content as decoded
    gw.response(flow)
    return flow.response


def whole(response) -> bytes:
    """Everything the box would see: status line, headers, raw and decoded body."""
    head = b"".join(k + b": " + v + b"\n" for k, v in response.headers.fields)
    try:
        decoded = response.get_content(strict=True) or b""
    except ValueError:
        decoded = b""
    return (response.data.reason or b"") + head + (response.raw_content or b"") + decoded


# (name, what the upstream puts in the body, what the box must get instead)
BODY_CASES = [
    ("body echo", f"key={REAL}", f"key={SENTINEL}"),
    ("base64", f"x {b64(REAL)} y", f"x {b64(SENTINEL)} y"),
    ("base64 unpadded", b64(REAL, pad=False), b64(SENTINEL, pad=False)),
    ("url-safe base64", b64(REAL, urlsafe=True), b64(SENTINEL, urlsafe=True)),
    ("url-safe base64 unpadded", b64(REAL, urlsafe=True, pad=False), b64(SENTINEL, urlsafe=True, pad=False)),
    ("value: pair", f"Basic {b64(REAL + ':')}", f"Basic {b64(SENTINEL + ':')}"),
    ("percent-encoded", f"?k={quote(REAL, safe='')}", f"?k={quote(SENTINEL, safe='')}"),
    ("percent-encoded lower hex", lower_hex(quote(REAL, safe="")), lower_hex(quote(SENTINEL, safe=""))),
    ("JSON escaped", f'{{"auth": "{json_escaped(REAL)}"}}', f'{{"auth": "{json_escaped(SENTINEL)}"}}'),
    ("JSON \\u escaped", f'{{"a": "{unicode_escaped(REAL)}"}}', f'{{"a": "{unicode_escaped(SENTINEL)}"}}'),
    ("HTML escaped", f"<p>{html.escape(REAL)}</p>", f"<p>{html.escape(SENTINEL)}</p>"),
    ("json.dumps of a headers dict", json.dumps({"headers": {"Authorization": f"Bearer {REAL}"}}),
     json.dumps({"headers": {"Authorization": f"Bearer {SENTINEL}"}})),
]


@pytest.mark.parametrize(("name", "body", "expected"), BODY_CASES, ids=[c[0] for c in BODY_CASES])
async def test_body_echoes_are_scrubbed(gw, cp, name, body, expected):
    flow = await allowed_flow(gw, cp)
    response = respond(gw, flow, content=body.encode())
    assert response.content == expected.encode()
    assert REAL.encode() not in whole(response)
    assert flow.metadata["roster_scrubbed"] >= 1


def test_lower_hex_case_differs_from_upper():
    # guards the "percent-encoded lower hex" case above against being the same as the upper one
    assert lower_hex(quote(REAL, safe="")) != quote(REAL, safe="")


async def test_plain_header_echo_in_values_and_names(gw, cp):
    flow = await allowed_flow(gw, cp)
    name = f"x-k-{b64(REAL, urlsafe=True, pad=False)}"
    response = respond(gw, flow, content=b"ok", headers={"X-Echo-Authorization": f"Bearer {REAL}", name: "1"})
    assert response.headers["x-echo-authorization"] == f"Bearer {SENTINEL}"
    assert f"x-k-{b64(SENTINEL, urlsafe=True, pad=False)}" in response.headers
    assert REAL.encode() not in whole(response) and name.encode() not in whole(response)
    assert flow.metadata["roster_scrubbed"] == 2


async def test_gzip_body_is_decoded_scrubbed_and_reencoded(gw, cp):
    flow = await allowed_flow(gw, cp)
    raw = gzip.compress(json.dumps({"headers": {"Authorization": f"Bearer {REAL}"}}).encode())
    response = respond(gw, flow, content=raw, headers={"Content-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    decoded = gzip.decompress(response.raw_content)
    assert SENTINEL.encode() in decoded and REAL.encode() not in decoded
    assert response.headers["content-length"] == str(len(response.raw_content))


async def test_basic_pair_the_gateway_built_is_scrubbed(gw, cp):
    decision = allow(replace=[{"sentinel": SENTINEL, "value": REAL}])
    flow = await allowed_flow(gw, cp, decision, headers=[("authorization", basic(SENTINEL))])
    built = flow.request.headers["authorization"]
    assert built == basic(REAL), "the gateway should have swapped the sentinel inside Basic credentials"
    pair = built.split()[1]
    body = f"{pair} {pair.rstrip('=')} {base64.urlsafe_b64encode(f'run:{REAL}'.encode()).decode()}"
    response = respond(gw, flow, content=body.encode(), headers={"X-Auth": built})
    assert response.headers["x-auth"] == basic(SENTINEL)
    assert b64(f"run:{REAL}").encode() not in whole(response)
    assert b64(f"run:{SENTINEL}").encode() in response.content


async def test_no_injection_leaves_the_response_untouched(gw, cp):
    flow = await allowed_flow(gw, cp, allow())
    assert "roster_scrubber" not in flow.metadata
    raw = gzip.compress(f"{REAL} {b64(REAL)}".encode())
    response = respond(gw, flow, content=raw, headers={"Content-Encoding": "gzip", "X-Echo": REAL})
    assert response.raw_content == raw and response.headers["x-echo"] == REAL
    assert "roster_scrubbed" not in flow.metadata


async def test_unknown_encoding_is_withheld_with_a_502(gw, cp):
    flow = await allowed_flow(gw, cp)
    response = respond(gw, flow, content=REAL.encode(), headers={"Content-Encoding": "x-roster-unknown"})
    assert response.status_code == 502
    doc = json.loads(response.content)
    assert doc["reason"] == "policy_error" and "echoed secret" in doc["message"]
    assert REAL.encode() not in whole(response)
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["status"] == 200 and "withheld" in outcome["error"]


@pytest.mark.parametrize("transfer_encoding", ["gzip, chunked", "gzip,chunked", "deflate,chunked", "gzip"])
async def test_transfer_coded_body_is_withheld_not_passed_compressed(gw, cp, transfer_encoding):
    # mitmproxy accepts a response whose Transfer-Encoding compresses the body (gzip,chunked, or gzip to
    # EOF) and forwards the compressed bytes untouched: a scrub of raw_content sees only gzip, and the box
    # gunzips the echoed secret itself. Anything but plain "chunked" is withheld.
    flow = await allowed_flow(gw, cp)
    raw = gzip.compress(f"you sent Bearer {REAL}".encode())
    response = respond(gw, flow, content=raw, headers={"Transfer-Encoding": transfer_encoding})
    assert response.status_code == 502
    assert json.loads(response.content)["reason"] == "policy_error"
    assert raw not in whole(response)


async def test_plain_chunked_response_is_still_scrubbed(gw, cp):
    flow = await allowed_flow(gw, cp)
    response = respond(gw, flow, content=f"key={REAL}".encode(), headers={"Transfer-Encoding": "chunked"})
    assert response.status_code == 200 and response.content == f"key={SENTINEL}".encode()


async def test_unknown_encoding_without_injection_passes(gw, cp):
    flow = await allowed_flow(gw, cp, allow())
    response = respond(gw, flow, content=b"opaque", headers={"Content-Encoding": "x-roster-unknown"})
    assert response.status_code == 200 and response.raw_content == b"opaque"


async def test_injected_value_without_a_sentinel_pair_is_redacted_whole(gw, cp):
    flow = await allowed_flow(gw, cp, allow(inject=[{"header": "x-api-key", "value": f"Token {REAL}"}]))
    response = respond(gw, flow, content=f"you sent Token {REAL}".encode())
    assert response.content == f"you sent {REDACTED}".encode()


async def test_outcome_counts_upstream_bytes_and_logs_never_the_value(gw, cp, caplog):
    caplog.set_level(logging.DEBUG)
    flow = await allowed_flow(gw, cp)
    body = f"{REAL}{REAL}".encode()
    respond(gw, flow, content=body, headers={"X-Echo": REAL})
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["response_bytes"] == len(body) and outcome["error"] == ""
    assert flow.metadata["roster_scrubbed"] == 3
    assert outcome["scrubbed"] == 3, "the control plane audits the count as a tripwire"
    assert "scrubbed 3" in caplog.text and REAL not in caplog.text
    assert "roster_scrubber" not in flow.metadata, "real values are dropped with the response"
    assert REAL not in repr(Scrubber([(SENTINEL, REAL)]))


async def test_large_body_is_scrubbed_throughout(gw, cp):
    flow = await allowed_flow(gw, cp)
    chunk = b"x" * 4093 + REAL.encode()
    response = respond(gw, flow, content=chunk * 2000)  # about 8 MB, occurrences all along
    assert REAL.encode() not in response.content
    assert response.content.count(SENTINEL.encode()) == 2000


def test_overlapping_occurrences_leave_no_real_value():
    scrubber = Scrubber([("S", "abab")])
    out, count = scrubber.scrub(b"abababab")
    assert b"abab" not in out and count == 2


@pytest.mark.parametrize("prefix", ["", "a", "ab", "abc", "Bearer ", "x-api-key: "])
def test_base64_of_a_text_containing_the_value_at_any_offset(prefix):
    scrubber = Scrubber([(SENTINEL, REAL)])
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        out, count = scrubber.scrub(encode(f"{prefix}{REAL} trailing".encode()))
        decoded = base64.b64decode(out + b"===", altchars=b"-_" if encode is not base64.b64encode else None)
        assert count == 1 and REAL.encode() not in decoded
        assert REAL[3:-3].encode() not in decoded, "no run of the value survives, whatever the alignment"


async def test_whole_injected_header_echoed_base64_comes_back_as_its_sentinel(gw, cp):
    flow = await allowed_flow(gw, cp)
    response = respond(gw, flow, content=b64(f"Bearer {REAL}").encode())
    assert response.content == b64(f"Bearer {SENTINEL}").encode()


def test_websocket_messages_from_the_server_are_scrubbed(gw):
    from mitmproxy import websocket
    from mitmproxy.test import tflow

    flow = tflow.twebsocketflow(messages=False)
    flow.metadata["roster_scrubber"] = Scrubber([(SENTINEL, REAL)])
    flow.websocket.messages.append(websocket.WebSocketMessage(1, False, f"echo {REAL}".encode()))
    gw.websocket_message(flow)
    assert flow.websocket.messages[-1].content == f"echo {SENTINEL}".encode()
    flow.websocket.messages.append(websocket.WebSocketMessage(1, True, REAL.encode()))
    gw.websocket_message(flow)
    assert flow.websocket.messages[-1].content == REAL.encode(), "what the box sends is the swap's business"
    gw.websocket_end(flow)
    assert "roster_scrubber" not in flow.metadata


def test_websocket_message_that_cannot_be_scrubbed_is_dropped_and_the_flow_killed(gw):
    # mitmproxy forwards a message when its hook raises; an unscrubbable one must never pass.
    from mitmproxy import websocket
    from mitmproxy.test import tflow

    class Failing:
        def scrub(self, data):
            raise RuntimeError("cannot scrub")

    flow = tflow.twebsocketflow(messages=False)
    flow.metadata["roster_scrubber"] = Failing()
    flow.websocket.messages.append(websocket.WebSocketMessage(1, False, f"echo {REAL}".encode()))
    gw.websocket_message(flow)
    assert flow.websocket.messages[-1].dropped
    assert flow.error is not None and flow.error.msg == flow_error.KILLED_MESSAGE


@pytest.mark.parametrize(("message", "killed"), [
    (f"unexpected server response: b'HTTP/1.1 200 OK\\r\\nX-Echo: Bearer {REAL}\\r\\n'", True),
    ("unexpected server response: b'HTTP/1.1 2'", True),  # raw upstream bytes: never shown
    ("Cannot parse HTTP response: header without a colon", True),
    ("connection refused", False),
])
async def test_upstream_errors_never_quote_the_secret_to_the_box(gw, cp, message, killed):
    flow = await allowed_flow(gw, cp)
    flow.error = flow_error(message)
    gw.error(flow)
    assert (flow.error.msg == flow_error.KILLED_MESSAGE) is killed
    assert "roster_scrubber" not in flow.metadata
    await settle(gw)
    [outcome] = reported(cp)
    assert REAL not in outcome["error"] and outcome["status"] == 502
    assert outcome["scrubbed"] == (1 if REAL in message else 0)


async def test_upstream_error_without_injection_is_left_alone(gw, cp):
    flow = await allowed_flow(gw, cp, allow())
    flow.error = flow_error(f"unexpected server response: b'{REAL}'")
    gw.error(flow)
    assert flow.error.msg.endswith(f"b'{REAL}'")


@pytest.mark.parametrize(("decision", "content", "headers", "expected"), [
    (None, b"nothing echoed here", {}, 0),
    (allow(), f"the box's own {REAL}".encode(), {}, 0),  # no secret handed out: nothing to scrub
    (None, b"\x00garbage", {"content-encoding": "x-unknown"}, 0),  # withheld: nothing reached the box
])
async def test_outcome_reports_zero_scrubbed_when_nothing_was_echoed(gw, cp, decision, content, headers,
                                                                     expected):
    flow = await allowed_flow(gw, cp, decision)
    respond(gw, flow, content=content, headers=headers)
    await settle(gw)
    [outcome] = reported(cp)
    assert outcome["scrubbed"] == expected and isinstance(outcome["scrubbed"], int)


async def test_secret_carrying_request_asks_for_the_whole_response(gw, cp):
    # A byte range of an echo is a slice of the secret that no whole-value scrub can find.
    flow = await allowed_flow(gw, cp, headers=[("Range", "bytes=7-9"), ("If-Range", '"etag"')])
    assert "range" not in flow.request.headers and "if-range" not in flow.request.headers


async def test_range_is_left_alone_when_no_secret_was_injected(gw, cp):
    flow = await allowed_flow(gw, cp, allow(), headers=[("Range", "bytes=7-9")])
    assert flow.request.headers["range"] == "bytes=7-9"


@pytest.mark.parametrize("status, headers", [
    (206, {"Content-Range": "bytes 7-9/40"}),
    (206, {}),
    (200, {"Content-Range": "bytes 7-9/40"}),
])
async def test_partial_response_to_a_secret_carrying_request_is_withheld(gw, cp, status, headers):
    flow = await allowed_flow(gw, cp)
    slice_of_secret = REAL[3:9].encode()
    flow.response = tutils.tresp(status_code=status, content=slice_of_secret, headers=tutils.http.Headers(
        [(k.encode(), v.encode()) for k, v in headers.items()]))
    gw.response(flow)
    assert flow.response.status_code == 502
    assert json.loads(flow.response.content)["reason"] == "policy_error"
    assert slice_of_secret not in flow.response.content
    await settle(gw)
    [outcome] = reported(cp)
    assert "partial content" in outcome["error"]


async def test_partial_response_without_a_secret_passes(gw, cp):
    flow = await allowed_flow(gw, cp, allow())
    flow.response = tutils.tresp(status_code=206, content=b"abc", headers=tutils.http.Headers(
        [(b"Content-Range", b"bytes 0-2/10")]))
    gw.response(flow)
    assert flow.response.status_code == 206 and flow.response.content == b"abc"


@pytest.mark.parametrize("offered, expected", [
    ("gzip, deflate, br, zstd", "gzip, deflate"),
    ("br", "identity"),
    ("gzip;q=1.0, br;q=0.9", "gzip;q=1.0"),
])
async def test_secret_carrying_request_offers_only_boundedly_decodable_encodings(gw, cp, offered, expected):
    flow = await allowed_flow(gw, cp, headers=[("Accept-Encoding", offered)])
    assert flow.request.headers["accept-encoding"] == expected


async def test_accept_encoding_is_not_added_or_narrowed_without_a_secret(gw, cp):
    assert "accept-encoding" not in (await allowed_flow(gw, cp)).request.headers
    flow = await allowed_flow(gw, cp, allow(), headers=[("Accept-Encoding", "br")])
    assert flow.request.headers["accept-encoding"] == "br"


@pytest.mark.parametrize("encoding", ["br", "zstd"])
async def test_unboundable_encoding_on_a_secret_carrying_flow_is_withheld(gw, cp, encoding):
    flow = await allowed_flow(gw, cp)
    response = respond(gw, flow, content=b"\x8b\x02\x80opaque\x03", headers={"Content-Encoding": encoding})
    assert response.status_code == 502 and json.loads(response.content)["reason"] == "policy_error"


async def test_compression_bomb_from_the_upstream_is_withheld_not_inflated(gw, cp):
    gw.config = dataclasses.replace(gw.config, max_body_bytes=1024 * 1024)
    flow = await allowed_flow(gw, cp)
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))  # 64 MiB inflated, about 64 KiB on the wire
    response = respond(gw, flow, content=bomb, headers={"Content-Encoding": "gzip"})
    assert response.status_code == 502
    assert "echoed secret" in json.loads(response.content)["message"]


async def test_body_just_under_the_limit_is_still_scrubbed(gw, cp):
    gw.config = dataclasses.replace(gw.config, max_body_bytes=4096)
    flow = await allowed_flow(gw, cp)
    body = (f"echo {REAL} ".encode() + b"x" * 4096)[:4096]
    response = respond(gw, flow, content=gzip.compress(body), headers={"Content-Encoding": "gzip"})
    assert response.status_code == 200 and REAL.encode() not in response.content
    assert SENTINEL.encode() in response.content
