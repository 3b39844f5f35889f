"""Host-side servers the box tests aim at: an upstream (plain and TLS) that records what reached it, and a
bare listener on all interfaces."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class Upstream:
    def __init__(self):
        self.requests: list[dict] = []


def _handler(upstream: Upstream):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            headers = {k.lower(): v for k, v in self.headers.items()}
            upstream.requests.append({"path": self.path, "headers": headers})
            body = b"upstream says hello"
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


class TestCA:
    """A throwaway CA for the TLS upstream; the gateway trusts it via ssl_verify_upstream_trusted_ca."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "roster test upstream CA")])
        self.cert = (
            self._builder(name, name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path = tmp / "upstream-ca.pem"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    @staticmethod
    def _builder(subject, issuer, public_key):
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=2))
        )

    def leaf(self) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        cert = (
            self._builder(subject, self.cert.subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(self.key, hashes.SHA256())
        )
        cert_path, key_path = self.tmp / "upstream.crt", self.tmp / "upstream.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_path, key_path


@contextlib.contextmanager
def upstream_server(ca: TestCA | None = None) -> Iterator[tuple[int, Upstream]]:
    """HTTP (or HTTPS under the test CA) on loopback: only the gateway can reach it."""
    upstream = Upstream()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream))
    if ca is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*ca.leaf())
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], upstream
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def listener_on_all_interfaces() -> Iterator[int]:
    """A port the host listens on everywhere (the kernel completes connects without accept())."""
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))
    sock.listen(64)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def host_listening_ports() -> list[int]:
    """Every TCP port something on the host listens on (any address, IPv4 and IPv6): the ports a box
    could hope to reach on the bridge address. A closed port is unreachable anyway."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)
