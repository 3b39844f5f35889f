"""Sentinels anywhere in a request. The control plane checks the request line and header values for
sentinels; a box can also put one in a body of any content type, a cookie, or an encoded form (percent,
base64 / base64url at any alignment, JSON and HTML escapes in any mix, UTF-16). The gateway reads the
whole request (after de-chunking and content decoding, within the body limit) for every known sentinel
in all those forms and reports what it found with /decide (`sentinels`), where a sentinel whose secret
the matched grant does not inject is denied `tripwire`.

The forms are the scrubber's (scrub.b64_forms / b64_cores) and the decoder readings are unescape.py's,
so both directions of the gateway share one list of encodings. Cost: one regex pass per reading of
each part, readings only where an escape character occurs, the body never beyond the body limit."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterable

from mitmproxy import http

from roster_gateway.client import ControlPlaneClient
from roster_gateway.decoding import DecodeRefused, bounded_content
from roster_gateway.scrub import b64_cores, b64_forms
from roster_gateway.unescape import readings


class SentinelFinder:
    """Finds which of `sentinels` occur in bytes, in any of the encodings a box could hide one in."""

    __slots__ = ("_forms", "_pattern")

    def __init__(self, sentinels: Iterable[str]) -> None:
        forms: dict[str, str] = {}  # a form's text -> its sentinel
        for sentinel in sorted({s for s in sentinels if s}):
            raw = sentinel.encode("utf-8", "surrogateescape")
            forms.setdefault(sentinel, sentinel)
            for encoded, _same in b64_forms(raw, raw) + b64_cores(raw, raw):
                forms.setdefault(encoded.decode("ascii"), sentinel)
        self._forms = forms
        needles = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, needles))) if needles else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def found_in(self, pieces: Iterable[bytes]) -> list[str]:
        if self._pattern is None:
            return []
        hits: set[str] = set()
        for piece in pieces:
            if piece:
                for text in readings(piece):
                    hits.update(self._forms[m.group(0)] for m in self._pattern.finditer(text))
        return sorted(hits)

    def found_in_request(self, request: http.Request, max_body: int) -> list[str]:
        """Request target, every header (cookies included) and the decoded body."""
        if self._pattern is None:
            return []
        pieces = [request.data.path, *(name + b": " + value for name, value in request.headers.fields)]
        try:
            pieces.append(bounded_content(request, max_body))
        except DecodeRefused:
            pieces.append(request.raw_content or b"")  # shapes.check_decoded_size refuses these anyway
        return self.found_in(pieces)


class SentinelList:
    """The control plane's sentinels, fetched again after `refresh_seconds`. A failed refresh keeps the
    last list; with no list at all the request is not judged (ControlPlaneDown: a deny)."""

    def __init__(self, client: ControlPlaneClient, refresh_seconds: float) -> None:
        self._client = client
        self._refresh = refresh_seconds
        self._finder: SentinelFinder | None = None
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()

    async def finder(self) -> SentinelFinder:
        if self._finder is not None and time.monotonic() - self._fetched_at < self._refresh:
            return self._finder
        async with self._lock:
            if self._finder is None or time.monotonic() - self._fetched_at >= self._refresh:
                try:
                    self._finder = SentinelFinder(await self._client.sentinels())
                except Exception:
                    if self._finder is None:
                        raise
                self._fetched_at = time.monotonic()
        return self._finder
