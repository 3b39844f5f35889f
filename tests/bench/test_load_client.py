"""The gateway bench's load client and helper servers against a real plain mitmdump: plain HTTP and
intercepted HTTPS (CONNECT, TLS to mitmdump trusting its CA, TLS from it to an HTTPS upstream under a
throwaway CA) both answer, and a client that does not trust the proxy's CA is refused the handshake."""

import ssl

import pytest

from bench.bench_gateway import _plain_mitmdump
from bench.gateway_servers import helper
from bench.load_client import http_target, https_target, measure
from tests.integration.gateway.upstreams import TestCA

pytestmark = pytest.mark.integration


@pytest.fixture
def proxied(tmp_path):
    ca = TestCA(tmp_path)
    cert, key = ca.leaf()
    with helper("upstream") as up_port, helper("upstream", str(cert), str(key)) as tls_port, \
            _plain_mitmdump(tmp_path, ca.cert_path) as (proxy_port, proxy_ca):
        yield ca, up_port, tls_port, proxy_port, proxy_ca


def test_http_and_intercepted_https_rows(proxied, capsys):
    _ca, up_port, tls_port, proxy_port, proxy_ca = proxied
    plain = measure("plain [HTTP]", http_target(proxy_port, up_port, None), 8, 32, warmup=2)
    tls = measure("plain [HTTPS]", https_target(proxy_port, tls_port, None, proxy_ca), 8, 32, warmup=2)
    assert plain["errors"] == 0 and tls["errors"] == 0
    assert plain["p50"] > 0 and tls["rps16"] > 0
    out = capsys.readouterr().out
    assert "plain [HTTP]" in out and "plain [HTTPS]" in out and "c16" in out


def test_client_not_trusting_the_proxy_ca_is_refused(proxied):
    ca, _up_port, tls_port, proxy_port, _proxy_ca = proxied
    # The upstream's CA is not the proxy's: the proxy's minted certificate must not verify.
    with pytest.raises(ssl.SSLCertVerificationError):
        measure("untrusted", https_target(proxy_port, tls_port, None, ca.cert_path), 1, 16, warmup=1)
