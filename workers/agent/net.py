# ruff: noqa: S310 - the agent fetches the URLs its model asks for; the gateway judges every one
"""HTTP through the gateway, standard library only. urllib reads HTTP(S)_PROXY (with the run token as
proxy credentials) and the TLS trust store the dispatcher mounted (the gateway's CA included), so nothing
here knows the gateway's address. A gateway refusal is a value, not an exception: the agent shows it to
the model, or stops on it."""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

REFUSAL_STATUSES = (402, 403, 407)
USER_AGENT = "roster-agent/1"


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> object:
        return json.loads(self.body)

    @property
    def refusal(self) -> Refusal | None:
        return refusal_of(self.status, self.headers, self.body)


@dataclass(frozen=True)
class Refusal:
    """The gateway said no (or the network failed before any answer): why, legibly."""

    status: int
    reason: str
    message: str

    def describe(self) -> str:
        what = {402: "over budget", 403: "forbidden", 407: "no valid run identity"}.get(self.status, "failed")
        return (f"REFUSED by the Roster gateway (HTTP {self.status} {what}, reason {self.reason}): "
                f"{self.message}")


def refusal_of(status: int, headers: dict[str, str], body: bytes) -> Refusal | None:
    """A gateway deny carries X-Roster-Deny-Reason and a JSON body {verdict, reason, message}."""
    reason = headers.get("x-roster-deny-reason", "")
    if not reason:
        return None
    message = ""
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            message = str(data.get("message", ""))
    except ValueError:
        message = body[:200].decode("utf-8", errors="replace")
    return Refusal(status=status, reason=reason, message=message)


def _context() -> ssl.SSLContext:
    bundle = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE")
    if bundle and os.path.isfile(bundle):
        return ssl.create_default_context(cafile=bundle)
    return ssl.create_default_context()


def _opener() -> urllib.request.OpenerDirector:
    # ProxyHandler() reads HTTP_PROXY/HTTPS_PROXY and sends their credentials (also on CONNECT).
    return urllib.request.build_opener(urllib.request.ProxyHandler(),
                                       urllib.request.HTTPSHandler(context=_context()))


class NetworkFailure(Exception):
    """No HTTP answer at all (the tunnel refused, the connection reset, a timeout)."""


def _request(method: str, url: str, headers: dict[str, str] | None, body: bytes | None):
    if not url.startswith(("http://", "https://")):
        raise NetworkFailure("only http:// and https:// URLs can be fetched")
    all_headers = {"User-Agent": USER_AGENT, **(headers or {})}
    return urllib.request.Request(url, data=body, headers=all_headers, method=method)


def _lower(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def send(method: str, url: str, *, headers: dict[str, str] | None = None, body: bytes | None = None,
         timeout: float = 60.0, max_bytes: int = 8 * 1024 * 1024) -> Reply:
    """One request; an HTTP error status is a Reply too. Raises NetworkFailure when nothing answered."""
    request = _request(method, url, headers, body)
    try:
        with _opener().open(request, timeout=timeout) as response:
            return Reply(response.status, _lower(response.headers), response.read(max_bytes))
    except urllib.error.HTTPError as exc:
        with exc:
            return Reply(exc.code, _lower(exc.headers or {}), exc.read(max_bytes))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise NetworkFailure(_network_reason(exc)) from exc


def _network_reason(exc: Exception) -> str:
    reason = getattr(exc, "reason", exc)
    return f"{reason.__class__.__name__}: {reason}" if not isinstance(reason, str) else reason


@dataclass
class Stream:
    """An open streamed response: its status and headers, then its lines (an error status is read whole)."""

    status: int
    headers: dict[str, str]
    lines: Iterator[bytes]
    body: bytes = b""
    close: object = None


def open_stream(url: str, *, headers: dict[str, str], body: bytes, timeout: float) -> Stream:
    request = _request("POST", url, headers, body)
    try:
        response = _opener().open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        with exc:
            return Stream(exc.code, _lower(exc.headers or {}), iter(()), exc.read(1024 * 1024))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise NetworkFailure(_network_reason(exc)) from exc
    return Stream(response.status, _lower(response.headers), iter(response), close=response.close)
