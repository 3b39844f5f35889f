"""Sentinels anywhere in a request (sentinels.py): request target, headers and cookies, bodies of any
content type, chunked or compressed, and encoded forms; reported to /decide as `sentinels`."""

from __future__ import annotations

import base64
import gzip
import json
from urllib.parse import quote

import pytest
from roster_gateway.sentinels import SentinelFinder

from tests.conftest import allow, make_flow, run_request

S = "sk-proj-EXAMPLEsentinel0123456789abcdef"
OTHER = "sk-roster-OTHERsentinel9876543210"


def every(fmt: str, text: str = S) -> str:
    return "".join(fmt.format(ord(c)) for c in text)


FORMS = [
    ("plain", S),
    ("percent every character", every("%{:02X}")),
    ("percent-encoded reserved only", quote(S)),
    ("base64", base64.b64encode(S.encode()).decode()),
    ("base64url unpadded", base64.urlsafe_b64encode(b"x:" + S.encode()).decode().rstrip("=")),
    ("base64 inside a longer text", base64.b64encode(b"user=me&key=" + S.encode() + b"&z=1").decode()),
    ("json \\u escapes", every("\\u{:04x}")),
    ("html decimal references", every("&#{};")),
    ("html hex references", every("&#x{:x};")),
    ("json inside html", every("\\u{:04x}").replace("\\", "&#92;")),
]


@pytest.mark.parametrize("name,text", FORMS, ids=[f[0] for f in FORMS])
def test_every_form_is_found(name, text):
    finder = SentinelFinder([S, OTHER])
    assert finder.found_in([f'{{"data": "{text}"}}'.encode()]) == [S]


def test_utf16_bodies_are_read():
    assert SentinelFinder([S]).found_in([f"note {S}".encode("utf-16")]) == [S]


def test_ordinary_text_finds_nothing():
    finder = SentinelFinder([S, OTHER])
    assert finder.found_in([b'{"q": "hello"}', b"%41%42", base64.b64encode(b"sk-proj-EXAMPLE")]) == []
    assert not SentinelFinder([]) and SentinelFinder([]).found_in([S.encode()]) == []


PLACES = [
    ("json body", {"method": "POST", "content": json.dumps({"k": S}).encode(),
                   "headers": [("content-type", "application/json")]}),
    ("form body", {"method": "POST", "content": f"a=1&key={quote(S)}".encode(),
                   "headers": [("content-type", "application/x-www-form-urlencoded")]}),
    ("binary body", {"method": "POST", "content": b"\x00\x01" + S.encode() + b"\xff",
                     "headers": [("content-type", "application/octet-stream")]}),
    ("gzip body", {"method": "POST", "content": gzip.compress(S.encode()),
                   "headers": [("content-encoding", "gzip")]}),
    ("cookie", {"headers": [("cookie", f"session=abc; k={S}")]}),
    ("header name", {"headers": [(f"x-{S}", "1")]}),
    ("query, percent-encoded", {"path": "/v1/x?k=" + every("%{:02x}")}),
]


@pytest.mark.parametrize("name,over", PLACES, ids=[p[0] for p in PLACES])
async def test_a_sentinel_anywhere_is_reported_to_decide(gw, cp, name, over):
    cp.sentinels = [S, OTHER]
    cp.decide = allow()
    flow = make_flow(**over)
    if "content-encoding" in dict(over.get("headers", [])):
        flow.request.raw_content = over["content"]
        flow.request.headers["content-length"] = str(len(over["content"]))
    await run_request(gw, flow)
    [payload] = cp.bodies("/decide")
    assert payload["sentinels"] == [S]


async def test_a_request_without_sentinels_carries_no_field(gw, cp):
    cp.sentinels = [S]
    await run_request(gw, make_flow(method="POST", content=b'{"q": 1}',
                                    headers=[("content-type", "application/json")]))
    assert "sentinels" not in cp.bodies("/decide")[0]


async def test_no_sentinel_list_means_no_decision(gw, cp):
    cp.fail_status = 500
    flow = await run_request(gw, make_flow())
    assert flow.response.status_code == 503 and cp.bodies("/decide") == []
