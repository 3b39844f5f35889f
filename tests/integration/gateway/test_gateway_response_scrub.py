"""Response scrubbing end to end: an upstream that echoes the request's headers back (in its body, also
base64 and percent-encoded, and in a response header) received the real secret, yet the box gets the
sentinel and never the real value, anywhere in the response bytes; the control plane audits the echo
as a tripwire naming the secret (never its value)."""

from __future__ import annotations

import base64
import gzip
import socket
import time
from urllib.parse import quote

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import RunDecision
from tests.integration.gateway.conftest import SECRET_VALUE, box_client, deny_body, grant

pytestmark = pytest.mark.integration


def _forms(text: str) -> list[bytes]:
    """The shapes an echo of `text` takes in these responses."""
    raw = text.encode()
    return [raw, base64.b64encode(raw), base64.b64encode(raw).rstrip(b"="), quote(text, safe="").encode()]


def raw_exchange(gateway, token: str, url: str, headers: dict[str, str]) -> bytes:
    """One plain-HTTP request through the proxy; the whole response as bytes (status line, headers, body)."""
    proxy_auth = base64.b64encode(f"run:{token}".encode()).decode()
    host = url.split("/")[2]
    lines = [f"GET {url} HTTP/1.1", f"Host: {host}", f"Proxy-Authorization: Basic {proxy_auth}",
             "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=20) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _tripwires_once_settled(run, timeout: float = 10.0) -> list[AuditRecord]:
    """The gateway reports outcomes in the background: wait until this run's outcome has settled."""
    deadline = time.monotonic() + timeout
    while not RunDecision.objects.filter(run=run, outcome_at__isnull=False).exists():
        assert time.monotonic() < deadline, "the outcome was never settled"
        time.sleep(0.05)
    return list(AuditRecord.objects.filter(kind="tripwire", run_id_ref=run.pk))


def test_injected_secret_echoed_in_body_and_header_reaches_the_box_as_its_sentinel(stack, run_token, secret):
    run, token = run_token
    grant("echo-injected", stack.http, secret=secret, inject_header="authorization",
          inject_format="Bearer {secret}")
    response = raw_exchange(stack.gateway, token, stack.http.url("/echo"), {})
    assert response.startswith(b"HTTP/1.1 200"), response[:200]
    assert stack.http.requests[0]["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"
    for form in _forms(SECRET_VALUE) + _forms(f"Bearer {SECRET_VALUE}"):
        assert form not in response
    assert f"x-echo-authorization: Bearer {secret.sentinel}".encode() in response
    for form in _forms(f"Bearer {secret.sentinel}"):
        assert form in response
    assert SECRET_VALUE not in stack.gateway.log_text()
    [tripwire] = _tripwires_once_settled(run)
    assert '"grant":"echo-injected"' in tripwire.body and f'"secret":"{secret.name}"' in tripwire.body
    assert f"upstream echoed the injected secret {secret.name};" in tripwire.body
    assert '"scrubbed":0' not in tripwire.body and "occurrences scrubbed before the box" in tripwire.body
    assert SECRET_VALUE not in tripwire.body and SECRET_VALUE not in str(AuditRecord.objects.values_list())


def test_basic_pair_the_gateway_built_is_scrubbed_back(stack, token, secret):
    grant("echo-basic", stack.http, secret=secret)
    sent = "Basic " + base64.b64encode(f"me:{secret.sentinel}".encode()).decode()
    response = raw_exchange(stack.gateway, token, stack.http.url("/echo"), {"Authorization": sent})
    real_pair = base64.b64encode(f"me:{SECRET_VALUE}".encode())
    assert stack.http.requests[0]["headers"]["authorization"] == "Basic " + real_pair.decode()
    assert real_pair not in response and SECRET_VALUE.encode() not in response
    assert sent.encode() in response  # the box gets back exactly what it sent


def test_gzip_echo_over_https_is_scrubbed(stack, token, secret):
    grant("echo-tls", stack.https, host="localhost", secret=secret, inject_header="x-api-key")
    with box_client(stack.gateway, token) as box, box.stream(
            "GET", stack.https.url("/echo-gzip", host="localhost")) as response:
        raw = b"".join(response.iter_raw())
        head = b"".join(k + b": " + v for k, v in response.headers.raw)
    assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
    assert stack.https.requests[0]["headers"]["x-api-key"] == SECRET_VALUE
    body = gzip.decompress(raw)
    assert secret.sentinel.encode() in body
    for form in _forms(SECRET_VALUE):
        assert form not in body and form not in raw and form not in head


def test_unknown_encoding_is_withheld(stack, token, secret):
    grant("echo-unknown", stack.http, secret=secret, inject_header="authorization")
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.http.url("/echo-unknown"))
    assert response.status_code == 502
    body = deny_body(response)
    assert body["reason"] == "policy_error" and "echoed secret" in body["message"]
    assert len(stack.http.requests) == 1  # it was forwarded; the answer was withheld
    assert SECRET_VALUE not in response.text and SECRET_VALUE not in str(response.headers)


def test_transfer_coded_gzip_echo_is_withheld(stack, token, secret):
    # Transfer-Encoding: gzip, chunked passes through mitmproxy still compressed; the box could gunzip it.
    grant("echo-te-gzip", stack.http, secret=secret, inject_header="authorization")
    response = raw_exchange(stack.gateway, token, stack.http.url("/echo-te-gzip"), {})
    assert stack.http.requests[0]["headers"]["authorization"] == SECRET_VALUE
    assert response.startswith(b"HTTP/1.1 502"), response[:200]
    assert b"echoed secret" in response and b"\x1f\x8b" not in response
    assert SECRET_VALUE.encode() not in response


def test_a_response_without_injection_is_untouched(stack, run_token):
    run, token = run_token
    grant("echo-plain", stack.http)
    response = raw_exchange(stack.gateway, token, stack.http.url("/echo"),
                            {"Authorization": f"Bearer {SECRET_VALUE}"})  # the box's own text, not ours
    assert f"Bearer {SECRET_VALUE}".encode() in response
    assert _tripwires_once_settled(run) == []  # nothing of ours was echoed: no tripwire


def test_a_broken_response_quoting_the_secret_never_reaches_the_box(stack, token, secret):
    # mitmproxy's own error page would quote the upstream's bytes ("unexpected server response: b'...'").
    grant("echo-broken", stack.http, secret=secret, inject_header="authorization",
          inject_format="Bearer {secret}")
    response = raw_exchange(stack.gateway, token, stack.http.url("/echo-broken"), {})
    assert stack.http.requests[0]["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"
    for form in _forms(SECRET_VALUE):
        assert form not in response
    assert SECRET_VALUE not in stack.gateway.log_text()


@pytest.mark.parametrize("endpoint", ["/echo-escaped-json", "/echo-escaped-html", "/echo-escaped-hex",
                                      "/echo-utf16"])
def test_an_echo_escaped_character_by_character_is_withheld(stack, run_token, secret, endpoint):
    run, token = run_token
    grant("echo-escaped", stack.http, secret=secret, inject_header="authorization",
          inject_format="Bearer {secret}")
    response = raw_exchange(stack.gateway, token, stack.http.url(endpoint), {})
    assert stack.http.requests[0]["headers"]["authorization"] == f"Bearer {SECRET_VALUE}"
    assert response.startswith(b"HTTP/1.1 502"), response[:200]
    assert b"policy_error" in response
    for text in (SECRET_VALUE, f"Bearer {SECRET_VALUE}"):
        for form in (text.encode(), text.encode("utf-16-le"), "".join(f"&#{ord(c)};" for c in text).encode(),
                     "".join(f"\\u{ord(c):04x}" for c in text).encode()):
            assert form not in response
