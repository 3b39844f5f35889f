"""A sentinel anywhere in a request toward a host without its secret's grant is a tripwire: a real
mitmdump scans bodies of any type, cookies, chunked and encoded forms; the control plane denies
`tripwire` with one tripwire record naming the secret; the upstream receives nothing."""

from __future__ import annotations

import base64
import json
import time

import pytest

from controlplane.audit.models import AuditRecord
from tests.integration.gateway.conftest import SECRET_VALUE, grant, proxy_auth, raw_request

pytestmark = pytest.mark.integration


def _every(fmt: str, text: str) -> str:
    return "".join(fmt.format(ord(c)) for c in text)


CASES = [
    ("json body", "application/json", lambda s: json.dumps({"note": s}).encode(), False),
    ("form body, percent-encoded", "application/x-www-form-urlencoded",
     lambda s: ("a=1&k=" + _every("%{:02X}", s)).encode(), False),
    ("text body, base64", "text/plain", lambda s: base64.b64encode(b"key:" + s.encode()), False),
    ("html body, escaped", "text/html", lambda s: _every("&#{};", s).encode(), False),
    ("chunked json body", "application/json", lambda s: json.dumps({"k": s}).encode(), True),
    ("cookie", None, None, False),
]


@pytest.mark.parametrize("name,content_type,make_body,chunked", CASES, ids=[c[0] for c in CASES])
def test_a_sentinel_anywhere_toward_another_host_is_a_tripwire(stack, run_token, secret, name, content_type,
                                                                 make_body, chunked):
    run, token = run_token
    grant("keyed", stack.http, secret=secret, inject_header="authorization", inject_format="Bearer {secret}")
    grant("other-plain", stack.other)  # the other host is granted, but not for this secret
    authority = f"127.0.0.1:{stack.other.port}"
    head = (f"POST http://{authority}/exfil HTTP/1.1\r\nHost: {authority}\r\n"
            f"Proxy-Authorization: {proxy_auth(token)}\r\n")
    if make_body is None:
        head, body = head + f"Cookie: a=1; k={secret.sentinel}\r\nContent-Length: 0\r\n", b""
    else:
        body = make_body(secret.sentinel)
        head += f"Content-Type: {content_type}\r\n"
        if chunked:
            head += "Transfer-Encoding: chunked\r\n"
            half = len(body) // 2
            body = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:])
        else:
            head += f"Content-Length: {len(body)}\r\n"
    status, answer = raw_request(stack.gateway, head.encode() + b"\r\n" + body)
    assert status == 403 and json.loads(answer)["reason"] == "tripwire", answer
    assert stack.other.requests == [] and stack.http.requests == []
    deadline = time.monotonic() + 5
    while not AuditRecord.objects.filter(kind="tripwire", run_id_ref=run.pk).exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    [record] = AuditRecord.objects.filter(kind="tripwire", run_id_ref=run.pk)
    assert f'"{secret.name}"' in record.body and SECRET_VALUE not in record.body


def test_a_body_without_a_sentinel_passes(stack, token, secret):
    grant("other-plain", stack.other)
    authority = f"127.0.0.1:{stack.other.port}"
    body = b'{"note": "nothing to see"}'
    status, _ = raw_request(stack.gateway, (
        f"POST http://{authority}/ok HTTP/1.1\r\nHost: {authority}\r\n"
        f"Proxy-Authorization: {proxy_auth(token)}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
    assert status == 200 and [r["body"] for r in stack.other.requests] == [body]
