"""The headers and body size the gateway reports to /decide are those it forwards (docs/wire.md): every
line, in order, repeated lines kept, names lower-cased, the proxy's own removed; the body's length as
forwarded (grants' header conditions and max_body_size are judged on them)."""

from __future__ import annotations

import gzip

from roster_gateway.facts import decide_payload, strip_proxy_headers

from tests.conftest import make_flow


def _payload(flow):
    strip_proxy_headers(flow.request)
    return decide_payload(flow.request, token="rt", client="10.89.0.2", scheme="http", mcp=(),
                          preview_bytes=16)


def test_every_header_line_is_reported_in_order_with_lower_case_names():
    flow = make_flow(method="POST", headers=[("X-HTTP-Method-Override", "POST"), ("Accept", "a"),
                                             ("x-http-method-override", "post"), ("Proxy-Connection", "x")])
    headers = _payload(flow)["headers"]
    assert [h for h in headers if h[0] != "host"] == [
        ["x-http-method-override", "POST"], ["accept", "a"], ["x-http-method-override", "post"]]
    # what is reported is what is forwarded
    assert [(k.lower(), v) for k, v in flow.request.headers.items(multi=True) if k.lower() != "host"] == [
        tuple(h) for h in headers if h[0] != "host"]


def test_the_body_size_is_the_forwarded_length_still_content_encoded():
    packed = gzip.compress(b'{"a": "' + b"x" * 1000 + b'"}')
    flow = make_flow(method="POST", headers=[("Content-Encoding", "gzip")], content=packed)
    payload = _payload(flow)
    assert payload["body_size"] == len(packed) == len(flow.request.raw_content)
