"""Request-shape tricks over raw sockets, address vetting, and protocols that are not HTTP(S)."""

from __future__ import annotations

import json
import socket
import ssl

import pytest

from tests.integration.gateway.conftest import box_client, deny_body, extra_gateway, grant
from tests.integration.gateway.conftest import proxy_auth as _auth
from tests.integration.gateway.conftest import raw_request as _raw
from tests.integration.gateway.conftest import read_response as _read_response
from tests.integration.gateway.upstreams import SilentServer

pytestmark = pytest.mark.integration


def _reason(body: bytes) -> str:
    return json.loads(body)["reason"]


def test_absolute_url_and_host_header_disagreeing_is_refused(stack, token):
    grant("plain", stack.http)
    grant("other", stack.other)
    status, body = _raw(stack.gateway, (
        f"GET http://127.0.0.1:{stack.http.port}/ HTTP/1.1\r\nHost: 127.0.0.1:{stack.other.port}\r\n"
        f"Proxy-Authorization: {_auth(token)}\r\n\r\n").encode())
    assert status == 403 and _reason(body) == "authority_mismatch"
    assert stack.http.requests == [] and stack.other.requests == []


SMUGGLING = [
    ("CL and TE", b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("two CL", b"Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcd"),
    ("TE not chunked", b"Transfer-Encoding: gzip\r\n\r\nabcd"),
    ("obfuscated TE", b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"),
    ("negative CL", b"Content-Length: -1\r\n\r\n"),
]


@pytest.mark.parametrize("name,tail", SMUGGLING, ids=[s[0] for s in SMUGGLING])
def test_smuggling_shapes_are_refused(stack, token, name, tail):
    grant("plain", stack.http)
    status, _body = _raw(stack.gateway, (
        f"POST http://127.0.0.1:{stack.http.port}/ HTTP/1.1\r\nHost: 127.0.0.1:{stack.http.port}\r\n"
        f"Proxy-Authorization: {_auth(token)}\r\n").encode() + tail)
    assert status == 400, name
    assert stack.http.requests == []


def test_oversized_body_is_refused_before_it_is_read(stack, token):
    grant("plain", stack.http)
    status, _ = _raw(stack.gateway, (
        f"POST http://127.0.0.1:{stack.http.port}/ HTTP/1.1\r\nHost: 127.0.0.1:{stack.http.port}\r\n"
        f"Proxy-Authorization: {_auth(token)}\r\nContent-Length: {10**12}\r\n\r\n").encode())
    assert status == 413
    assert stack.http.requests == []


def test_method_override_header_is_refused(stack, token):
    # A POST-only grant must not run a DELETE on an upstream that honours X-HTTP-Method-Override.
    grant("post-only", stack.http, schemes=["http"], methods=["POST"])
    with box_client(stack.gateway, token) as box:
        response = box.post(stack.http.url("/"), headers={"x-http-method-override": "DELETE"})
        assert response.status_code == 400 and deny_body(response)["reason"] == "malformed_request"
        assert stack.http.requests == []
        assert box.post(stack.http.url("/")).status_code == 200


def test_protocol_upgrade_other_than_websocket_is_refused(stack, token):
    grant("plain", stack.http)
    with box_client(stack.gateway, token) as box:
        response = box.get(stack.http.url("/"), headers={"upgrade": "h2c", "connection": "upgrade"})
    assert response.status_code == 403 and deny_body(response)["reason"] == "protocol_refused"
    assert stack.http.requests == []


def _tls_inside_connect(stack, token, target: str, sni: str, host_header: str,
                        request_target: str = "/inner") -> tuple[int, bytes]:
    sock = socket.create_connection(("127.0.0.1", stack.gateway.port), timeout=10)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: {_auth(token)}\r\n\r\n"
                 .encode())
    status, _ = _read_response(sock)
    assert status == 200
    context = ssl.create_default_context(cafile=str(stack.gateway.ca_cert_path))
    context.check_hostname = False
    with context.wrap_socket(sock, server_hostname=sni) as tls:
        tls.sendall(f"GET {request_target} HTTP/1.1\r\nHost: {host_header}\r\n\r\n".encode())
        return _read_response(tls)


def test_host_inside_a_tunnel_must_match_the_connect_target(stack, token):
    grant("tls", stack.https, host="localhost")
    target = f"localhost:{stack.https.port}"
    ok_status, _ = _tls_inside_connect(stack, token, target, "localhost", target)
    assert ok_status == 200
    status, body = _tls_inside_connect(stack, token, target, "localhost", f"127.0.0.1:{stack.https.port}")
    assert status == 403 and _reason(body) == "authority_mismatch"
    status, body = _tls_inside_connect(stack, token, target, "evil.example", target)
    assert status == 403 and _reason(body) == "authority_mismatch"
    assert [r["path"] for r in stack.https.requests] == ["/inner"]


def test_absolute_form_inside_a_tunnel_naming_another_host_is_refused(stack, token, secret):
    # Inside a CONNECT mitmproxy keeps an absolute-form request line as sent and forwards it; a server
    # (nginx, a CDN) routes by that authority and ignores Host (RFC 9112 3.2.2), so the injected secret
    # would reach another virtual host at the granted address.
    grant("tls-secret", stack.https, host="localhost", secret=secret, inject_header="x-api-key")
    target = f"localhost:{stack.https.port}"
    status, body = _tls_inside_connect(stack, token, target, "localhost", target,
                                       request_target=f"https://evil.example:{stack.https.port}/inner")
    assert status == 403 and _reason(body) == "authority_mismatch"
    assert stack.https.requests == []
    ok_status, _ = _tls_inside_connect(stack, token, target, "localhost", target,
                                       request_target=f"https://{target}/same")
    assert ok_status == 200 and len(stack.https.requests) == 1


def test_raw_tcp_inside_a_connect_is_refused_and_nothing_is_dialled(stack, token):
    listener = SilentServer()
    try:
        with socket.create_connection(("127.0.0.1", stack.gateway.port), timeout=10) as sock:
            target = f"127.0.0.1:{listener.port}"
            sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
                         f"Proxy-Authorization: {_auth(token)}\r\n\r\n".encode())
            status, _ = _read_response(sock)
            assert status == 200  # no tunnel grant: intercepted, every byte inside is judged
            sock.sendall(b"SSH-2.0-OpenSSH_9.0\r\n\x00\x01binary")
            sock.settimeout(10)
            assert sock.recv(1024) == b""  # closed by the gateway
        listener.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            listener.sock.accept()
    finally:
        listener.close()


def test_control_plane_and_gateway_ports_are_never_upstreams(stack, token):
    cp_port = int(stack.control_plane_url.rsplit(":", 1)[1])
    from controlplane.policy.models import Grant

    Grant.objects.create(slug="cp", host="127.0.0.1", port=cp_port, schemes=["http"])
    Grant.objects.create(slug="self", host="127.0.0.1", port=stack.gateway.port, schemes=["http"])
    with box_client(stack.gateway, token) as box:
        to_cp = box.get(f"http://127.0.0.1:{cp_port}/api/gateway/health")
        to_self = box.get(f"http://127.0.0.1:{stack.gateway.port}/")
    assert to_cp.status_code == 403 and deny_body(to_cp)["reason"] == "blocked_address"
    assert to_self.status_code == 403 and deny_body(to_self)["reason"] == "blocked_address"


def test_default_gateway_never_dials_loopback_by_name(stack, token, tmp_path):
    grant("loop", stack.http, host="localhost")
    with extra_gateway(stack.control_plane_url, tmp_path) as closed, box_client(closed, token) as box:
        response = box.get(stack.http.url("/", host="localhost"))
        ungranted = box.get(stack.other.url("/"))
    assert response.status_code == 403 and deny_body(response)["reason"] == "blocked_address"
    assert ungranted.status_code == 403 and deny_body(ungranted)["reason"] == "no_grant"
    assert stack.http.requests == [] and stack.other.requests == []


def test_a_grant_naming_a_loopback_literal_is_refused_until_the_operator_lists_it(stack, token, tmp_path):
    # Issue 27.2: an IP literal in a grant is not the operator's listing (README, private upstreams).
    grant("explicit-ip", stack.http, host="127.0.0.1")
    with extra_gateway(stack.control_plane_url, tmp_path) as closed, box_client(closed, token) as box:
        refused = box.get(stack.http.url("/unlisted"))
        mapped = box.get(f"http://[::ffff:127.0.0.1]:{stack.http.port}/mapped")
    assert refused.status_code == 403 and deny_body(refused)["reason"] == "blocked_address"
    assert mapped.status_code in (400, 403)  # refused, whichever step sees the mapped form first
    assert stack.http.requests == []
    options = {"roster_private_upstreams": f"127.0.0.1:{stack.http.port}"}
    with extra_gateway(stack.control_plane_url, tmp_path, extra_options=options) as gw, \
            box_client(gw, token) as box:
        response = box.get(stack.http.url("/explicit"))
        to_cp = box.get(f"{stack.control_plane_url}/api/gateway/health")
    assert response.status_code == 200
    assert to_cp.status_code == 403  # no grant for it, and never dialled even with one
    assert [r["path"] for r in stack.http.requests] == ["/explicit"]
