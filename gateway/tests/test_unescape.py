"""Echoes escaped character by character, in any mix, or re-encoded as UTF-16, are never handed to the
box: the scrubber reads the response as a decoder would (unescape.py) and withholds it (502) when a real
value appears in any reading. Plain and ordinary responses pass untouched."""

from __future__ import annotations

import json

import pytest
from roster_gateway.scrub import Scrubber, Unscrubbable
from roster_gateway.unescape import js_unescape, readings

from tests.conftest import allow, make_flow, run_request

SENTINEL = "sk-proj-SENTINELsentinelSENTINEL0123"
REAL = "realKey0123456789abcXYZ"


def every(fmt: str, text: str = REAL) -> str:
    return "".join(fmt.format(ord(c)) for c in text)


MIX = ("\\u{:04x}", "&#{};", "%{:02x}", "{}")
ECHOES = [
    ("json \\u00xx every character", every("\\u{:04x}")),
    ("json \\u00XX every character", every("\\u{:04X}")),
    ("js \\xXX every character", every("\\x{:02x}")),
    ("js \\u{X} every character", every("\\u{{{:x}}}")),
    ("html &#NN; every character", every("&#{};")),
    ("html &#xNN; every character", every("&#x{:x};")),
    ("html &#x00NN; without semicolons", every("&#x00{:X}")),
    ("percent every character", every("%{:02X}")),
    ("a mix of forms", "".join(MIX[i % 4].format(ord(c) if i % 4 < 3 else c) for i, c in enumerate(REAL))),
    ("html inside json", json.dumps(every("&#{};"))),
    ("json inside html", every("\\u{:04x}").replace("\\", "&#92;")),
]


@pytest.mark.parametrize("name,body", ECHOES, ids=[e[0] for e in ECHOES])
def test_every_escaped_echo_is_found(name, body):
    scrubber = Scrubber([(SENTINEL, REAL)])
    with pytest.raises(Unscrubbable):
        scrubber.check_readings(f'{{"echo": "{body}"}}'.encode())


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("prefix", [b"", b"x"], ids=["aligned", "odd offset"])
def test_utf16_echoes_are_found(encoding, prefix):
    scrubber = Scrubber([(SENTINEL, REAL)])
    with pytest.raises(Unscrubbable):
        scrubber.check_readings(prefix + f'{{"echo": "{REAL}"}}'.encode(encoding))


CLEAN = [
    ("plain json", b'{"ok": true, "path": "/v1/x?a=%2F"}'),
    ("escapes of other text", every("\\u{:04x}", "hello world").encode()),
    ("the sentinel escaped", every("&#{};", SENTINEL).encode()),
    ("utf-16 of other text", "hello world".encode("utf-16")),
    ("binary", bytes(range(256)) * 4),
]


@pytest.mark.parametrize("name,body", CLEAN, ids=[c[0] for c in CLEAN])
def test_responses_without_the_value_pass(name, body):
    Scrubber([(SENTINEL, REAL)]).check_readings(body)


def test_readings_are_bounded_to_two_layers():
    triple = every("\\u{:04x}").replace("\\", "&#92;").replace("&", "%26")  # percent of html of json
    assert not any(REAL in text for text in readings(triple.encode()))


def test_js_unescape_table():
    assert js_unescape(r"\u0041\x42\103\u{44}\/\n\q") == "ABCD/\nq"
    assert js_unescape("\\u{110000}") == "\ufffd"


async def test_an_escaped_echo_is_withheld_from_the_box(gw, cp):
    from mitmproxy.test import tutils

    cp.decide = allow(replace=[{"sentinel": SENTINEL, "value": REAL}])
    flow = await run_request(gw, make_flow(headers=[("x-api-key", SENTINEL)]))
    assert flow.response is None
    flow.response = tutils.tresp(content=f'{{"echo": "{every("&#x{:x};")}"}}'.encode())
    gw.response(flow)
    assert flow.response.status_code == 502
    assert b"&#x72;" not in flow.response.content and REAL.encode() not in flow.response.content
