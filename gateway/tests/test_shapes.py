"""Request-shape tricks, through the addon: each is refused before the control plane is asked."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PUBLIC_IP, make_flow

SHAPES = [
    # name, flow kwargs, status, reason
    ("CL and TE together", dict(headers=[("Content-Length", "5"), ("Transfer-Encoding", "chunked")]),
     400, "malformed_request"),
    ("two Content-Length", dict(headers=[("Content-Length", "5"), ("Content-Length", "6")]), 400,
     "malformed_request"),
    ("TE not chunked", dict(headers=[("Transfer-Encoding", "gzip, chunked")]), 400, "malformed_request"),
    ("TE twice", dict(headers=[("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")]), 400,
     "malformed_request"),
    ("signed Content-Length", dict(headers=[("Content-Length", "+5")]), 400, "malformed_request"),
    ("oversized by header", dict(headers=[("Content-Length", str(64 * 1024 * 1024))]), 413, "body_too_large"),
    ("two Host headers", dict(headers=[("Host", "evil.example")]), 400, "malformed_request"),
    ("h2c upgrade", dict(headers=[("Upgrade", "h2c")]), 403, "protocol_refused"),
    ("method override header", dict(method="POST", headers=[("X-HTTP-Method-Override", "DELETE")]), 400,
     "malformed_request"),
    ("method override, other spelling", dict(method="GET", headers=[("x-method-override", "PUT")]), 400,
     "malformed_request"),
    ("path override header", dict(headers=[("X-Original-URL", "/admin/delete")]), 400, "malformed_request"),
    ("path override, rewrite spelling", dict(headers=[("X-Rewrite-URL", "/admin")]), 400,
     "malformed_request"),
    ("method override, second value", dict(method="POST", headers=[("X-HTTP-Method", "POST"),
                                                                    ("X-HTTP-Method", "DELETE")]), 400,
     "malformed_request"),
    ("absolute URL vs Host", dict(host_header="evil.example"), 403, "authority_mismatch"),
    ("Host port differs", dict(host_header=f"{PUBLIC_IP}:8080"), 403, "authority_mismatch"),
    ("Host with userinfo", dict(host_header=f"user@{PUBLIC_IP}"), 400, "malformed_request"),
    ("Host with path", dict(host_header=f"{PUBLIC_IP}/x"), 400, "malformed_request"),
    ("Host trailing colon", dict(host_header=f"{PUBLIC_IP}:"), 400, "malformed_request"),
    ("empty Host", dict(host_header=""), 400, "malformed_request"),
    ("SNI differs from Host", dict(scheme="https", port=443, sni="evil.example"), 403, "authority_mismatch"),
    ("port zero", dict(port=0, host_header=f"{PUBLIC_IP}:0"), 400, "malformed_request"),
    ("labelled JSON that does not parse", dict(method="POST", content=b"{nope",
                                               headers=[("content-type", "application/json")]),
     400, "malformed_request"),
    ("unknown content-encoding", dict(method="POST", content=b"xx",
                                      headers=[("content-encoding", "x-weird")]), 400, "malformed_request"),
    ("gzip that does not inflate", dict(method="POST", content=b"not gzip",
                                        headers=[("content-encoding", "gzip")]), 400, "malformed_request"),
]


@pytest.mark.parametrize("name,kwargs,status,reason", SHAPES, ids=[s[0] for s in SHAPES])
async def test_request_shapes_are_refused_before_deciding(gw, cp, name, kwargs, status, reason):
    flow = make_flow(**kwargs)
    gw.requestheaders(flow)
    await gw.request(flow)
    assert flow.response is not None, name
    assert flow.response.status_code == status
    assert json.loads(flow.response.content)["reason"] == reason
    assert cp.bodies("/decide") == []


async def test_method_override_naming_the_same_method_passes(gw, cp):
    flow = make_flow(method="POST", headers=[("X-HTTP-Method-Override", "post")])
    gw.requestheaders(flow)
    await gw.request(flow)
    assert flow.response is None and cp.bodies("/decide")[0]["method"] == "POST"


async def test_path_override_naming_the_same_path_passes(gw, cp):
    flow = make_flow(path="/v1/x", headers=[("X-Original-URL", "/v1/x")])
    gw.requestheaders(flow)
    await gw.request(flow)
    assert flow.response is None


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_compression_bomb_is_refused_without_decoding_it_whole(gw, cp, encoding):
    import gzip
    import zlib

    gw.tctx.options.update(roster_max_body_bytes=10_000)
    inflated = b"{" + b" " * 50_000 + b"}"
    compress = {"gzip": gzip.compress, "deflate": zlib.compress}[encoding]
    packed = compress(inflated)
    assert len(packed) < 10_000
    flow = make_flow(method="POST", content=packed, headers=[("content-encoding", encoding)])
    await gw.request(flow)
    assert flow.response.status_code == 413 and cp.bodies("/decide") == []
    small = make_flow(method="POST", content=compress(b"{}"), headers=[("content-encoding", encoding)])
    await gw.request(small)
    assert small.response is None


@pytest.mark.parametrize("encoding", ["br", "zstd"])
async def test_request_bodies_without_a_bounded_decoder_are_refused(gw, cp, encoding):
    from mitmproxy.net import encoding as codecs

    flow = make_flow(method="POST", content=codecs.encode(b"{}", encoding),
                     headers=[("content-encoding", encoding)])
    await gw.request(flow)
    assert flow.response.status_code == 400 and cp.bodies("/decide") == []


async def test_oversized_chunked_body_is_refused(gw, cp):
    gw.tctx.options.update(roster_max_body_bytes=10)
    flow = make_flow(method="POST", content=b"x" * 11)
    del flow.request.headers["content-length"]
    await gw.request(flow)
    assert flow.response.status_code == 413


@pytest.mark.parametrize("host_header", [PUBLIC_IP, f"{PUBLIC_IP}:80"])
async def test_equivalent_host_headers_pass(gw, cp, host_header):
    flow = make_flow(host_header=host_header)
    gw.requestheaders(flow)
    await gw.request(flow)
    assert flow.response is None


async def test_host_is_normalised_for_the_decision(gw, cp):
    flow = make_flow(host="Example.COM.", host_header="example.com")
    flow.request.data.host = "Example.COM."
    gw.requestheaders(flow)
    await gw.request(flow)
    assert cp.bodies("/decide")[0]["host"] == "example.com"


async def test_request_inside_a_connect_must_match_its_target(gw, cp):
    from roster_gateway.steps import ConnState

    flow = make_flow(scheme="https", port=443, host="93.184.216.35", host_header="93.184.216.35", sni=None)
    state = gw.conns[flow.client_conn.id] = ConnState()
    state.connect_target, state.token = (PUBLIC_IP, 443), "rt_good"
    await gw.request(flow)
    assert flow.response.status_code == 403
    assert json.loads(flow.response.content)["reason"] == "authority_mismatch"


async def test_absolute_form_inside_a_connect_must_name_its_target(gw, cp):
    # mitmproxy sets host/port from the tunnel but forwards the request line's authority as sent.
    from roster_gateway.steps import ConnState

    flow = make_flow(scheme="https", port=443, host=PUBLIC_IP, host_header=PUBLIC_IP, sni=None)
    flow.request.authority = "evil.example"
    state = gw.conns[flow.client_conn.id] = ConnState()
    state.connect_target, state.token = (PUBLIC_IP, 443), "rt_good"
    await gw.request(flow)
    assert flow.response.status_code == 403
    assert json.loads(flow.response.content)["reason"] == "authority_mismatch"
    assert cp.bodies("/decide") == []
    same = make_flow(scheme="https", port=443, host=PUBLIC_IP, host_header=PUBLIC_IP, sni=None)
    same.request.authority = f"{PUBLIC_IP}:443"
    gw.conns[same.client_conn.id] = state
    await gw.request(same)
    assert same.response is None


async def test_mcp_calls_reach_the_decision(gw, cp):
    body = b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"}}]'
    flow = make_flow(method="POST", content=body, headers=[("content-type", "application/json")])
    gw.requestheaders(flow)
    await gw.request(flow)
    sent = cp.bodies("/decide")[0]
    assert sent["mcp"] == [{"method": "tools/call", "tool": "search"}]
    assert sent["body_size"] == len(body) and len(sent["body_sha256"]) == 64


async def test_gzip_mcp_body_is_read_decoded(gw, cp):
    import gzip

    body = gzip.compress(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm"}}')
    flow = make_flow(method="POST", content=body, headers=[("content-type", "application/json"),
                                                           ("content-encoding", "gzip")])
    gw.requestheaders(flow)
    await gw.request(flow)
    assert cp.bodies("/decide")[0]["mcp"] == [{"method": "tools/call", "tool": "rm"}]


SIZES = [
    ("target at the limit", {"path": "/" + "a" * 99}, None),
    ("target over the limit", {"path": "/" + "a" * 100}, (414, "uri_too_long")),
    ("query counts toward the target", {"path": "/a?" + "q" * 98}, (414, "uri_too_long")),
    ("header fields at the limit", {"headers": [(f"x-{i}", "v") for i in range(8)]}, None),
    ("too many header fields", {"headers": [(f"x-{i}", "v") for i in range(9)]}, (431, "headers_too_large")),
    ("header value at the limit", {"headers": [("x-big", "b" * 50)]}, None),
    ("header value over the limit", {"headers": [("x-big", "b" * 51)]}, (431, "headers_too_large")),
]


@pytest.mark.parametrize("name,over,expected", SIZES, ids=[s[0] for s in SIZES])
async def test_size_limits_are_414_and_431_before_any_decision(gw, cp, name, over, expected):
    gw.tctx.options.update(roster_max_target_bytes=100, roster_max_headers=10, roster_max_header_bytes=50)
    flow = make_flow(**over)  # Host and Proxy-Authorization are two more fields
    gw.requestheaders(flow)
    await gw.request(flow)
    if expected is None:
        assert flow.response is None
    else:
        assert (flow.response.status_code, flow.response.headers["x-roster-deny-reason"]) == expected
        assert cp.bodies("/decide") == []


# --- check_head and check_request: the order the addon runs the checks in ---
def test_check_request_runs_every_check_even_without_the_head_hook(gw):
    from dataclasses import replace

    from roster_gateway import shapes

    config = replace(gw.config, max_body_bytes=10)
    smuggled = make_flow(headers=[("Content-Length", "5"), ("Transfer-Encoding", "chunked")]).request
    assert shapes.check_request(smuggled, config, connect_target=None, sni=None).reason == "malformed_request"
    chunked = make_flow(method="POST", headers=[("Transfer-Encoding", "chunked")]).request
    chunked.raw_content = b"x" * 11  # no Content-Length to refuse by: the body itself is measured
    assert shapes.check_request(chunked, config, connect_target=None, sni=None).status == 413
    plain = make_flow(scheme="https", port=443).request
    assert shapes.check_request(plain, config, connect_target=None, sni=None) is None
    assert shapes.check_request(plain, config, connect_target=None,
                                sni="evil.example").reason == "authority_mismatch"
    assert shapes.check_request(plain, config, connect_target=("other.example", 443),
                                sni=None).reason == "authority_mismatch"


def test_an_unreadable_head_is_a_400_early_and_an_error_when_judging(gw, monkeypatch):
    from roster_gateway import shapes

    def unreadable(request, max_body_bytes):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad")

    monkeypatch.setattr(shapes, "check_headers", unreadable)
    request = make_flow().request
    refusal = shapes.check_head(request, gw.config)
    assert (refusal.status, refusal.reason, refusal.message) == (400, "malformed_request",
                                                                 "unreadable request headers")
    with pytest.raises(UnicodeDecodeError):  # the request hook's fail_closed turns this into a 503
        shapes.check_request(request, gw.config, connect_target=None, sni=None)
