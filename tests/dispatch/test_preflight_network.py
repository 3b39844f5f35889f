"""network_check against network descriptions as Docker returns them (the real ones are exercised in
tests/integration/boxes/test_preflight.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import docker
import pytest

from controlplane.dispatch.preflight import BoxNetwork, PreflightRefused, ca_check, network_check

GOOD = {
    "Driver": "bridge", "Internal": True, "EnableIPv6": False,
    "Options": {"com.docker.network.bridge.enable_icc": "false", "com.docker.network.bridge.name": "rstbr"},
    "IPAM": {"Config": [{"Subnet": "172.30.0.0/16", "Gateway": "172.30.0.1"}]},
}


class FakeNetworks:
    def __init__(self, attrs):
        self.attrs = attrs

    def get(self, name):
        if self.attrs is None:
            raise docker.errors.NotFound("no such network")
        return SimpleNamespace(attrs=self.attrs)


def _client(attrs):
    return SimpleNamespace(networks=FakeNetworks(attrs))


def test_locked_network_passes():
    assert network_check(_client(GOOD), "boxes") == BoxNetwork("boxes", "rstbr", "172.30.0.1")


@pytest.mark.parametrize(("change", "expected"), [
    ({"Driver": "host"}, "not a bridge"),
    ({"Internal": False}, "not internal"),
    ({"Options": {"com.docker.network.bridge.name": "rstbr"}}, "allows traffic between boxes"),
    ({"Options": {"com.docker.network.bridge.enable_icc": "true",
                  "com.docker.network.bridge.name": "rstbr"}}, "allows traffic between boxes"),
    ({"Options": {"com.docker.network.bridge.enable_icc": "false"}}, "no dedicated bridge name"),
    ({"IPAM": {"Config": []}}, "no IPv4 bridge address"),
    ({"EnableIPv6": True}, "IPv6 enabled"),
])
def test_open_networks_are_refused(change, expected):
    with pytest.raises(PreflightRefused, match=expected):
        network_check(_client({**GOOD, **change}), "boxes")


def test_missing_network_is_refused():
    with pytest.raises(PreflightRefused, match="does not exist"):
        network_check(_client(None), "boxes")


def test_ca_must_be_a_lone_public_certificate(tmp_path, settings):
    path = tmp_path / "ca.pem"
    settings.ROSTER_GATEWAY_CA_CERT = path
    with pytest.raises(PreflightRefused, match="unreadable"):
        ca_check()
    cert = "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n"
    path.write_text(cert + "-----BEGIN PRIVATE KEY-----\nK\n")
    with pytest.raises(PreflightRefused, match="not a lone public certificate"):
        ca_check()
    path.write_text(cert)
    ca_check()


@pytest.fixture
def health_server():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answer = {"status": 200, "body": b""}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            self.send_response(answer["status"])
            self.send_header("Content-Length", str(len(answer["body"])))
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/healthz", answer
    server.shutdown()
    server.server_close()


def test_gateway_must_be_healthy_and_listening_on_the_bridge(health_server, settings):
    import socket

    from controlplane.dispatch.preflight import gateway_check

    url, answer = health_server
    settings.ROSTER_GATEWAY_HEALTH_URL = url
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    settings.ROSTER_GATEWAY_PORT = listener.getsockname()[1]
    network = BoxNetwork("boxes", "rstbr", "127.0.0.1")
    gateway_check(network)  # healthy and listening
    answer["status"] = 503
    with pytest.raises(PreflightRefused, match="answered 503"):
        gateway_check(network)
    answer["status"] = 200
    listener.close()
    with pytest.raises(PreflightRefused, match="not listening on the bridge address"):
        gateway_check(network)


def test_a_gateway_disagreeing_with_the_control_plane_is_refused_naming_why(health_server, settings):
    from controlplane.dispatch.preflight import gateway_check

    url, answer = health_server
    settings.ROSTER_GATEWAY_HEALTH_URL = url
    answer.update(status=503, body=json.dumps({
        "ok": False, "gateway": True, "control_plane": True, "disagreements": [
            "roster_outcome_batch_max is 512: it must be at most the control plane's "
            "ROSTER_OUTCOME_BATCH_MAX (256)"]}).encode())
    with pytest.raises(PreflightRefused, match=r"answered 503: its settings disagree with the control "
                                               r"plane's: roster_outcome_batch_max is 512"):
        gateway_check(BoxNetwork("boxes", "rstbr", "127.0.0.1"))
