"""Local upstream servers for the gateway tests: plain HTTP and HTTPS under a throwaway test CA, each
recording exactly what reached it (method, path, headers, body)."""

from __future__ import annotations

import base64
import datetime
import gzip
import ipaddress
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class TestCA:
    """Signs the HTTPS upstream's certificate; the gateway trusts it via ssl_verify_upstream_trusted_ca."""

    __test__ = False

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "roster gateway test upstream CA")])
        self.cert = (self._builder(name, name, self.key.public_key())
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.cert_path = tmp / "upstream-ca.pem"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    @staticmethod
    def _builder(subject, issuer, public_key):
        now = datetime.datetime.now(datetime.UTC)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(hours=2)))

    def leaf(self) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = (self._builder(subject, self.cert.subject, key.public_key())
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .sign(self.key, hashes.SHA256()))
        cert_path, key_path = self.tmp / "upstream.crt", self.tmp / "upstream.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_path, key_path


class Upstream:
    """One listening server; `.requests` is everything that reached it."""

    def __init__(self, ca: TestCA | None = None):
        self.requests: list[dict] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.tls = ca is not None
        if ca is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*ca.leaf())
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}{path}"

    def seen_text(self) -> str:
        return json.dumps(self.requests, default=repr)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(upstream: Upstream):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
                body = b""
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    body += self.rfile.read(size)
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return body
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length else b""

        def _record(self):
            body = self._body()
            upstream.requests.append({"method": self.command, "path": self.path, "body": body,
                                      "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "header_lines": [(k.lower(), v) for k, v in self.headers.items()]})
            if self.path.startswith("/echo"):
                self._echo()
                return
            payload = json.dumps({"ok": True, "path": self.path}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _echo(self):
            """httpbin-style: the request's headers back in the body (also base64 and percent-encoded)
            and the Authorization header quoted in a response header. /echo-gzip gzips the body,
            /echo-unknown labels it with an unknown content-encoding, /echo-te-gzip gzips it
            as a transfer-coding, /echo-broken breaks off mid-head."""
            headers = {k: v for k, v in self.headers.items()}
            auth = self.headers.get("authorization", "")
            if self.path.startswith("/echo-broken"):
                # Half a response head quoting the header, then hang up: the proxy's parse error
                # would carry these bytes.
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Echo: " + auth.encode() + b"\r\n")
                self.wfile.flush()
                self.close_connection = True
                return
            payload = json.dumps({"headers": headers, "b64": base64.b64encode(auth.encode()).decode(),
                                  "quoted": quote(auth, safe="")}).encode()
            if self.path.startswith("/echo-te-gzip"):
                # Compressed by a transfer-coding, not a content-coding: no Content-Encoding to decode.
                body = gzip.compress(payload)
                self.send_response(200)
                self.send_header("transfer-encoding", "gzip, chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
                return
            escaped = {"/echo-escaped-json": lambda t: "".join(f"\\u{ord(c):04x}" for c in t).encode(),
                       "/echo-escaped-html": lambda t: "".join(f"&#{ord(c)};" for c in t).encode(),
                       "/echo-escaped-hex": lambda t: "".join(f"&#x{ord(c):X};" for c in t).encode(),
                       "/echo-utf16": lambda t: t.encode("utf-16")}
            for prefix, encode in escaped.items():
                if self.path.startswith(prefix):
                    # Every character escaped (or the whole text re-encoded): what no list of forms covers.
                    payload = b'{"echo": "' + encode(auth) + b'"}'
            encoding = None
            if self.path.startswith("/echo-gzip"):
                payload, encoding = gzip.compress(payload), "gzip"
            elif self.path.startswith("/echo-unknown"):
                encoding = "x-roster-unknown"
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("x-echo-authorization", auth)
            if encoding:
                self.send_header("content-encoding", encoding)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = _record  # noqa: N815 - http.server's naming
        # Methods in other cases reach a case-sensitive upstream as sent: record them too.
        do_get = do_Get = do_post = do_delete = do_dElEtE = _record  # noqa: N815

        def log_message(self, *args):
            pass

    return Handler


class SilentServer:
    """Accepts connections and never answers: a control plane slower than any timeout."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()
