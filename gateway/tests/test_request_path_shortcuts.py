"""The request path's shortcuts (issue 28: the gateway's own cost per request) answer exactly as the plain
readings they replaced: one pass over the header fields for the smuggling checks and for stripping the
proxy headers, remembered answers of pure string checks, remembered vetting verdicts, and an outcome
journal kept open between writes. Each reference below is the reading the gateway did before."""

from __future__ import annotations

import ipaddress
import itertools
import json
import random
import re

import pytest
from mitmproxy.test import tutils
from roster_gateway import canonical, facts, memo, shapes
from roster_gateway.addresses import AddressRefused, Vetting
from roster_gateway.outcome_journal import OutcomeJournal
from roster_gateway.private_upstreams import parse_entry

from tests.test_canonical import TABLE

_BAD = re.compile(r"[\r\n\x00]")


def _reference_check_headers(request, max_body_bytes):
    """check_headers as it read the fields before: one get_all per name, every field decoded."""
    cl, te = request.headers.get_all("content-length"), request.headers.get_all("transfer-encoding")
    if cl and te:
        return shapes._malformed("both Content-Length and Transfer-Encoding: refused as request smuggling")
    if len(cl) > 1:
        return shapes._malformed("more than one Content-Length header")
    if len(te) > 1 or (te and te[0].strip().lower() not in shapes._ALLOWED_TE):
        return shapes._malformed("Transfer-Encoding other than a single 'chunked'")
    if cl and not shapes._CONTENT_LENGTH.match(cl[0]):
        return shapes._malformed("Content-Length is not a plain decimal number")
    if cl and int(cl[0]) > max_body_bytes:
        return shapes.too_large(max_body_bytes)
    if len(request.headers.get_all("host")) > 1:
        return shapes._malformed("more than one Host header")
    for name, value in request.headers.items(multi=True):
        if _BAD.search(name) or _BAD.search(value):
            return shapes._malformed("control characters in a header")
    for name in shapes._METHOD_OVERRIDES:
        for value in request.headers.get_all(name):
            if value.strip().upper() != request.method.upper():
                return shapes._malformed(
                    f"{name} naming another method than {request.method[:16]!r} is refused")
    for name in shapes._URL_OVERRIDES:
        for value in request.headers.get_all(name):
            if value.strip() != request.path:
                return shapes._malformed(f"{name} naming another path than the request's is refused")
    upgrade = request.headers.get("upgrade")
    if upgrade is not None and upgrade.strip().lower() != "websocket":
        return shapes.Refusal("protocol_refused", 403, f"protocol upgrade to {upgrade[:40]!r} is refused")
    return None


# Fields a box could send, in the spellings and byte shapes that matter: case, repeats, non-UTF-8 bytes,
# control characters in names and values, a Kelvin sign (U+212A, which str.lower() turns into "k").
FIELDS = [
    (b"Host", b"93.184.216.34"), (b"host", b"evil.example"), (b"Content-Length", b"5"),
    (b"content-length", b"+5"), (b"CONTENT-LENGTH", b"99999999"), (b"Transfer-Encoding", b"chunked"),
    (b"transfer-encoding", b"gzip"), (b"Upgrade", b"websocket"), (b"upgrade", b"h2c"),
    (b"UPGRADE", b" WebSocket "), (b"X-HTTP-Method-Override", b"GET"), (b"x-http-method", b"DELETE"),
    (b"X-Method-Override", b" get "), (b"X-Original-URL", b"/v1/x"), (b"x-rewrite-url", b"/admin"),
    (b"X-Evil", b"a\r\nb"), (b"X-Nul\x00", b"v"), (b"x-http-method-override", b"\xc3\xa9"),
    (b"X-Bytes", b"\xff\xfe caf\xc3\xa9"),
    (b"Upgr\xe2\x84\xaade", b"h2c"), (b"Content-Lengt\xe2\x84\xaa", b"7"), (b"Accept", b"*/*"),
    (b"X-LF", b"line\n"),
]


def _request(fields, method=b"GET"):
    return tutils.treq(method=method, path=b"/v1/x", headers=tutils.http.Headers(list(fields)))


def _field_sets():
    rng = random.Random(28)
    sets = [[f] for f in FIELDS] + [list(pair) for pair in itertools.combinations(FIELDS, 2)]
    sets += [rng.sample(FIELDS, rng.randint(3, 7)) for _ in range(300)]
    return sets


@pytest.mark.parametrize("method", [b"GET", b"POST"])
def test_the_header_checks_answer_as_reading_each_name_did(method):
    for fields in _field_sets():
        request = _request(fields, method)
        assert shapes.check_headers(request, 1000) == _reference_check_headers(request, 1000), fields


def test_the_proxy_headers_are_stripped_as_popping_each_name_did():
    extra = [(b"Proxy-Authorization", b"Basic eDp5"), (b"proxy-connection", b"keep-alive"),
             (b"PROXY-AUTHENTICATE", b"Basic"), (b"Proxy-Authorizatio\xe2\x84\xaa", b"kept")]
    rng = random.Random(4)
    for fields in _field_sets()[:200]:
        fields = fields + rng.sample(extra, rng.randint(0, len(extra)))
        rng.shuffle(fields)
        ours, reference = _request(fields), _request(fields)
        facts.strip_proxy_headers(ours)
        for name in facts.HOP_BY_HOP:
            reference.headers.pop(name, None)
        assert ours.headers.fields == reference.headers.fields


def test_remembered_string_checks_answer_as_the_checks_themselves():
    paths = [raw for raw, _ in TABLE] + ["/v1/x", "/a/./b", "/%41", "/" + "a" * (memo.SHORT + 10)]
    for path in paths * 2:  # the second round answers from memory
        assert canonical.path_refusal(path) == canonical._path_refusal(path)
    for host in ["Example.com", "example.com.", "example.com:080", "[::1]:443", "a" * (memo.SHORT + 1)] * 2:
        assert canonical.host_refusal(host) == canonical._host_refusal(host)
        assert shapes._split_authority(host) == shapes._split_authority.__wrapped__(host)
        assert shapes.normalise_host(host) == shapes.normalise_host.__wrapped__(host)


def test_only_short_strings_are_remembered():
    calls = []

    @memo.remembered
    def length(value: str) -> int:
        calls.append(value)
        return len(value)

    short, long = "x" * memo.SHORT, "x" * (memo.SHORT + 1)
    answers = [length(short), length(short), length(long), length(long)]
    assert answers == [memo.SHORT, memo.SHORT, memo.SHORT + 1, memo.SHORT + 1]
    assert calls == [short, long, long]


def test_a_remembered_vetting_verdict_refuses_again_and_names_matter():
    vetting = Vetting(allow_loopback=False, own_ports=frozenset({8080}), control_plane=("127.0.0.1", 8000),
                      private_upstreams=(parse_entry("llm.internal:443"),))
    internal = ipaddress.ip_address("10.1.2.3")
    for _ in range(2):
        with pytest.raises(AddressRefused, match="not a public address"):
            vetting.check(internal, 443, name="other.internal")
        vetting.check(internal, 443, name="llm.internal")  # the listed name may dial it
        with pytest.raises(AddressRefused, match="not a public address"):
            vetting.check(internal, 443)
        with pytest.raises(AddressRefused, match="not dialable"):
            vetting.check(ipaddress.ip_address("93.184.216.34"), 0)
    assert vetting == Vetting(allow_loopback=False, own_ports=frozenset({8080}),
                              control_plane=("127.0.0.1", 8000),
                              private_upstreams=(parse_entry("llm.internal:443"),))


def test_an_emptied_journal_keeps_taking_reports_in_the_same_private_file(tmp_path):
    path = tmp_path / "outcomes.jsonl"
    journal = OutcomeJournal(path)
    journal.add({"decision_id": "dc_1", "status": 200})
    journal.ack(["dc_1"])  # nothing pending: the file is emptied
    assert path.read_bytes() == b""
    journal.add({"decision_id": "dc_2", "status": 200, "error": "caf\u00e9"})
    assert path.read_bytes() == b'{"add":{"decision_id":"dc_2","status":200,"error":"caf\\u00e9"}}\n'
    assert path.stat().st_mode & 0o077 == 0
    assert list(OutcomeJournal(path).pending) == ["dc_2"]


def test_a_journal_whose_file_was_rewritten_writes_to_the_new_file(tmp_path):
    path = tmp_path / "outcomes.jsonl"
    journal = OutcomeJournal(path)
    journal.add({"decision_id": "dc_keep"})
    journal._lines = 10**6  # as after many acknowledgements: the next one compacts (rewrites) the file
    journal.add({"decision_id": "dc_gone"})
    journal.ack(["dc_gone"])
    journal.add({"decision_id": "dc_new"})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"add": {"decision_id": "dc_keep"}}, {"add": {"decision_id": "dc_new"}}]
