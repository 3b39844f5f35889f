"""Request-shape checks: the tricks a hostile client plays to make the gateway judge one thing and the
upstream receive another. Each returns a Refusal (reason + legible message) or None; check_head and
check_request run them in the order the addon applies them."""

from __future__ import annotations

import gzip
import io
import re
import zlib
from dataclasses import dataclass

from mitmproxy import http

from roster_gateway.canonical import host_refusal, method_refusal, path_refusal
from roster_gateway.memo import remembered
from roster_gateway.options import GatewayConfig

_CONTENT_LENGTH = re.compile(r"^(?:0|[1-9][0-9]*)$")
_ALLOWED_TE = frozenset({"chunked"})
# On the raw bytes: UTF-8 decoding (surrogateescape) maps these bytes, and nothing else, to CR, LF, NUL.
_BAD_FIELD_BYTES = re.compile(rb"[\r\n\x00]")
_METHOD_OVERRIDES = ("x-http-method-override", "x-http-method", "x-method-override")
_URL_OVERRIDES = ("x-original-url", "x-rewrite-url")
_WATCHED_FIELDS = frozenset(n.encode() for n in ("content-length", "transfer-encoding", "host", "upgrade",
                                                 *_METHOD_OVERRIDES, *_URL_OVERRIDES))


@dataclass(frozen=True)
class Refusal:
    reason: str
    status: int
    message: str


def too_large(limit: int) -> Refusal:
    return Refusal("body_too_large", 413, f"request body over the gateway's limit of {limit} bytes")


def _malformed(message: str) -> Refusal:
    return Refusal("malformed_request", 400, message)


@remembered  # called several times per request, on the same few hosts
def normalise_host(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host[:-1] if host.endswith(".") else host


def default_port(scheme: str) -> int:
    return 443 if scheme in ("https", "wss") else 80


@remembered  # a Host header or a request line's authority
def _split_authority(value: str) -> tuple[str, int | None] | None:
    value = value.strip()
    if not value or any(c in value for c in "/?#@\\ \t"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
    else:
        host, _, port_text = value.partition(":")
        if value.count(":") > 1:
            return None
    if port_text == "":
        return (normalise_host(host), None) if ":" not in value[-1:] else None
    if not port_text.isdigit() or len(port_text) > 5:
        return None
    return normalise_host(host), int(port_text)


def _watched(request: http.Request) -> tuple[dict[bytes, list[str]], bool]:
    """One pass over the header fields: the values of the ones check_headers reads (decoded as
    mitmproxy's get_all decodes them, names matched as it matches them), and whether any name or value
    holds a control character."""
    watched: dict[bytes, list[str]] = {}
    bad = False
    for name, value in request.headers.fields:
        if not bad and (_BAD_FIELD_BYTES.search(name) or _BAD_FIELD_BYTES.search(value)):
            bad = True
        key = name.lower()
        if key in _WATCHED_FIELDS:
            watched.setdefault(key, []).append(value.decode("utf-8", "surrogateescape"))
    return watched, bad


def check_headers(request: http.Request, max_body_bytes: int) -> Refusal | None:
    """Smuggling shapes and limits visible before the body is read."""
    watched, bad_chars = _watched(request)
    cl = watched.get(b"content-length", [])
    te = watched.get(b"transfer-encoding", [])
    if cl and te:
        return _malformed("both Content-Length and Transfer-Encoding: refused as request smuggling")
    if len(cl) > 1:
        return _malformed("more than one Content-Length header")
    if len(te) > 1 or (te and te[0].strip().lower() not in _ALLOWED_TE):
        return _malformed("Transfer-Encoding other than a single 'chunked'")
    if cl and not _CONTENT_LENGTH.match(cl[0]):
        return _malformed("Content-Length is not a plain decimal number")
    if cl and int(cl[0]) > max_body_bytes:
        return too_large(max_body_bytes)
    if len(watched.get(b"host", ())) > 1:
        return _malformed("more than one Host header")
    if bad_chars:
        return _malformed("control characters in a header")
    for name in _METHOD_OVERRIDES:
        for value in watched.get(name.encode(), ()):
            if value.strip().upper() != request.method.upper():
                # Google APIs, Rails, Express method-override run the named method, not the one judged.
                return _malformed(f"{name} naming another method than {request.method[:16]!r} is refused")
    for name in _URL_OVERRIDES:
        for value in watched.get(name.encode(), ()):
            if value.strip() != request.path:
                # IIS, Symfony, Laminas route by these headers instead of the path that was judged.
                return _malformed(f"{name} naming another path than the request's is refused")
    upgrades = watched.get(b"upgrade")
    upgrade = ", ".join(upgrades) if upgrades else None  # as headers.get folds repeated fields
    if upgrade is not None and upgrade.strip().lower() != "websocket":
        return Refusal("protocol_refused", 403, f"protocol upgrade to {upgrade[:40]!r} is refused")
    return None


def _inflated_size(raw: bytes, limit: int) -> int:
    # As mitmproxy decodes deflate: zlib-wrapped, else raw deflate.
    for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):
        try:
            return len(zlib.decompressobj(wbits).decompress(raw, limit + 1))
        except zlib.error:
            continue
    raise ValueError("deflate body does not inflate")


def check_decoded_size(request: http.Request, limit: int) -> Refusal | None:
    """The gateway decodes a request body to read its MCP calls; a small compressed body (a gzip bomb)
    would expand to gigabytes in the gateway every box shares. Decode at most limit + 1 bytes first."""
    raw = request.raw_content or b""
    if not raw:
        return None
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity", "none"):
        return None
    try:
        if encoding == "gzip":
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
                size = len(f.read(limit + 1))
        elif encoding == "deflate":
            size = _inflated_size(raw, limit)
        else:  # br, zstd: not decoded in bounded memory here; anything else mitmproxy cannot decode
            return _malformed(f"request body content-encoding {encoding[:40]!r} is not accepted")
    except Exception:  # noqa: BLE001 - undecodable: refused, never guessed
        return _malformed("request body does not decode as its content-encoding says")
    return too_large(limit) if size > limit else None


def check_authority(request: http.Request, *, connect_target: tuple[str, int] | None,
                    sni: str | None) -> Refusal | None:
    """The authority mitmproxy will dial (request.host/port) must agree with the Host header, the
    CONNECT target and the TLS SNI; otherwise the decision would be about a different host."""
    host = normalise_host(request.host)
    port = request.port
    if not host:
        return _malformed("request has no destination host")
    if not 0 < port < 65536:
        return Refusal("malformed_request", 400, f"port {port} is not a valid port")
    header = request.host_header
    if header is None:
        return _malformed("request has no Host header")
    parsed = _split_authority(header)
    if parsed is None:
        return _malformed("Host header is not a valid authority")
    h_host, h_port = parsed
    if h_host != host or (h_port or default_port(request.scheme)) != port:
        return Refusal("authority_mismatch", 403,
                       "the request URL and the Host header name different destinations")
    authority = request.authority  # decoded afresh by mitmproxy on every read
    if authority:
        # An absolute-form request line is forwarded as sent inside a tunnel (mitmproxy rewrites only
        # host/port), and servers route by its authority, ignoring Host (RFC 9112 3.2.2).
        parsed = _split_authority(authority)
        if parsed is None:
            return _malformed("request target authority is not valid")
        a_host, a_port = parsed
        if a_host != host or (a_port or default_port(request.scheme)) != port:
            return Refusal("authority_mismatch", 403,
                           "the request line names a different destination than the one judged")
    if connect_target is not None:
        c_host, c_port = connect_target
        if normalise_host(c_host) != host or c_port != port:
            return Refusal("authority_mismatch", 403,
                           "the request names a different destination than its CONNECT tunnel")
    if sni is not None and normalise_host(sni) != host:
        return Refusal("authority_mismatch", 403, "the TLS server name differs from the request's host")
    return None


def check_canonical(request: http.Request) -> Refusal | None:
    """The method, Host and path as sent must be the forms the control plane judges (canonical.py):
    otherwise a request judged as one target would run upstream as another."""
    sent_method = request.data.method.decode("utf-8", "surrogateescape")  # .method is upper-cased
    authority = request.authority
    for problem in (method_refusal(sent_method), path_refusal(request.path),
                    host_refusal(request.host_header or ""),
                    host_refusal(authority) if authority else None):
        if problem:
            return Refusal("malformed_request", 400, problem)
    return None


def check_sizes(request: http.Request, config: GatewayConfig) -> Refusal | None:
    """Limits the decision API also enforces, answered here with the status that names them: an over-long
    request target is 414, too many or too long header fields 431 (never a control-plane failure)."""
    max_target, max_headers, max_header = config.max_target_bytes, config.max_headers, config.max_header_bytes
    if len(request.data.path) > max_target:
        return Refusal("uri_too_long", 414,
                       f"request target longer than the gateway's limit of {max_target} bytes")
    fields = request.headers.fields
    if len(fields) > max_headers:
        return Refusal("headers_too_large", 431, f"more than {max_headers} request header fields")
    if any(len(value) > max_header or len(name) > 256 for name, value in fields):
        return Refusal("headers_too_large", 431,
                       f"a request header field is longer than the gateway's limit of {max_header} bytes")
    return None


def check_head(request: http.Request, config: GatewayConfig) -> Refusal | None:
    """The checks that need only the request line and headers: run as soon as they arrive, before the
    body is read, and again before judging (a later addon or mitmproxy may have changed the request)."""
    try:
        return check_sizes(request, config) or check_headers(request, config.max_body_bytes)
    except Exception:  # noqa: BLE001 - fail closed
        return _malformed("unreadable request headers")


def check_request(request: http.Request, config: GatewayConfig, *, connect_target: tuple[str, int] | None,
                  sni: str | None) -> Refusal | None:
    """Every shape check a whole request passes before it is judged: head, body size (raw, then decoded),
    then authority (against Host, the CONNECT target and the TLS SNI) and canonical forms."""
    refusal = check_sizes(request, config) or check_headers(request, config.max_body_bytes)
    if refusal:
        return refusal
    if len(request.raw_content or b"") > config.max_body_bytes:
        return too_large(config.max_body_bytes)
    return (check_decoded_size(request, config.max_body_bytes)
            or check_authority(request, connect_target=connect_target, sni=sni)
            or check_canonical(request))
