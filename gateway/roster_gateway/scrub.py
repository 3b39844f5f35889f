"""Response scrubbing: an upstream that echoes the request (an httpbin-style reflector, an error page
quoting the Authorization header) would carry the real secret the gateway injected back into the box.
For every flow that received a secret, each occurrence of the real value in the response's headers
(names and values), reason phrase, trailers and decoded body is replaced by that secret's sentinel,
also in the encodings an echo would use: base64 (standard and url-safe, padded or not; of the value,
`value:` and the Basic `user:value` pairs the gateway built), percent-encoding, JSON string escapes and
HTML escapes (an error page quoting the header).

A Scrubber holds real values only in memory for the life of its flow; its repr shows counts only."""

from __future__ import annotations

import base64
import html
import json
import logging
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

from mitmproxy import http

from roster_gateway.decoding import DecodeRefused, bounded_content
from roster_gateway.responses import deny_flow
from roster_gateway.unescape import SEPARATORS, read_as_is, readings

log = logging.getLogger("roster_gateway")

# Put in place of an injected header value whose secret the decision did not pair with a sentinel.
REDACTED = "[roster: injected secret removed]"
_MAX_PASSES = 3  # a replacement could in theory complete a new occurrence; re-check, then give up
DEFAULT_MAX_DECODED = 32 * 1024 * 1024  # the gateway passes its roster_max_body_bytes
_MIN_CORE_BYTES = 6  # below this, unaligned base64 pieces are too short to look for without false hits


class Unscrubbable(Exception):
    """The response could not be checked (undecodable body, or echoes that do not go away)."""


def b64_forms(real: bytes, fake: bytes) -> list[tuple[bytes, bytes]]:
    forms = []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        padded_real, padded_fake = encode(real), encode(fake)
        forms.append((padded_real, padded_fake))
        forms.append((padded_real.rstrip(b"="), padded_fake.rstrip(b"=")))
    return forms


def _whole_groups(data: bytes) -> bytes:
    return data[:len(data) - len(data) % 3]


def b64_cores(real: bytes, fake: bytes) -> list[tuple[bytes, bytes]]:
    """base64 of a text that merely contains the value (a whole header, a whole body) at any offset: the
    characters that depend on the value's bytes alone (whole 3-byte groups inside it), for each of the
    three alignments. Replaced by the sentinel's at the same alignment: that echo decodes to garbage
    around the sentinel, but carries no secret."""
    forms = []
    for skip in range(3):
        core_real, core_fake = _whole_groups(real[skip:]), _whole_groups(fake[skip:])
        if len(core_real) < _MIN_CORE_BYTES:
            continue
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            forms.append((encode(core_real), encode(core_fake)))
    return forms


def _percent_forms(real: str, fake: str) -> list[tuple[str, str]]:
    forms = []
    for encode in (lambda s: quote(s, safe=""), quote_plus):
        encoded_real, encoded_fake = encode(real), encode(fake)
        forms.append((encoded_real, encoded_fake))
        # hex digits in either case (%2F and %2f)
        lower = re.compile(r"%[0-9A-F]{2}")
        forms.append((lower.sub(lambda m: m.group(0).lower(), encoded_real),
                      lower.sub(lambda m: m.group(0).lower(), encoded_fake)))
    return forms


_NOT_ASCII_ALNUM = re.compile(r"[^A-Za-z0-9]")


def _unicode_escape(text: str, upper: bool) -> str:
    """Every character but ASCII letters and digits as a `\\uXXXX` escape (a pattern, not a loop: a
    scrubber is built for every request that carries a secret)."""
    spec = "\\u{:04X}" if upper else "\\u{:04x}"
    return _NOT_ASCII_ALNUM.sub(lambda m: spec.format(ord(m.group(0))), text)


def _json_forms(real: str, fake: str) -> list[tuple[str, str]]:
    forms = []
    for ensure_ascii in (True, False):
        escaped_real = json.dumps(real, ensure_ascii=ensure_ascii)[1:-1]
        escaped_fake = json.dumps(fake, ensure_ascii=ensure_ascii)[1:-1]
        forms.append((escaped_real, escaped_fake))
        forms.append((escaped_real.replace("/", "\\/"), escaped_fake.replace("/", "\\/")))
    forms.append((_unicode_escape(real, False), _unicode_escape(fake, False)))
    forms.append((_unicode_escape(real, True), _unicode_escape(fake, True)))
    return forms


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class Scrubber:
    """Replaces a flow's real secret values (and their encodings) by sentinels in bytes."""

    __slots__ = ("_hidden", "_max_decoded", "_pattern", "_swaps", "separators")

    def __init__(self, pairs: Iterable[tuple[str, str]], built: Iterable[tuple[str, str]] = (),
                 whole_values: Iterable[str] = (), max_decoded_bytes: int = DEFAULT_MAX_DECODED) -> None:
        """`pairs`: (sentinel, real value). `built`: (real plain text, sentinel plain text) of Basic
        credentials the gateway built. `whole_values`: injected header values with no known secret
        inside, replaced whole by REDACTED."""
        self._max_decoded = max_decoded_bytes
        swaps: dict[bytes, bytes] = {}

        def add(real: bytes, fake: bytes) -> None:
            if real and real != fake:
                swaps.setdefault(real, fake)

        plain: list[tuple[str, str]] = []
        for sentinel, real in pairs:
            if real:
                plain += [(real, sentinel), (real + ":", sentinel + ":")]
        plain += [(real, fake) for real, fake in built if real]
        for sentinel, real in pairs:
            if real:
                for b_real, b_fake in b64_cores(_bytes(real), _bytes(sentinel)):
                    add(b_real, b_fake)
        for real, fake in plain:
            add(_bytes(real), _bytes(fake))
            for b_real, b_fake in b64_forms(_bytes(real), _bytes(fake)):
                add(b_real, b_fake)
            html_forms = [(html.escape(real, quote=q), html.escape(fake, quote=q)) for q in (True, False)]
            for s_real, s_fake in _percent_forms(real, fake) + _json_forms(real, fake) + html_forms:
                add(_bytes(s_real), _bytes(s_fake))
        for value in whole_values:
            add(_bytes(value), REDACTED.encode())
        self._swaps = swaps
        reals = sorted({real for _s, real in pairs if real} | {real for real, _f in built if real}
                       | {value for value in whole_values if value}, key=len, reverse=True)
        # Found in a decoder's reading of an already scrubbed response: an echo in a form not replaced.
        self._hidden = re.compile("|".join(re.escape(r) for r in reals)) if reals else None
        # The separators (unescape.SEPARATORS) that no real value holds: no reading finds one across them.
        self.separators = bytes(ord(c) for c in SEPARATORS if not any(c in real for real in reals))
        # Longest first: an alternation takes the first alternative that matches at a position.
        needles = sorted(swaps, key=len, reverse=True)
        self._pattern = re.compile(b"|".join(re.escape(n) for n in needles)) if needles else None

    def __repr__(self) -> str:
        return f"Scrubber({len(self._swaps)} forms)"

    def __bool__(self) -> bool:
        return self._pattern is not None

    @property
    def longest_form(self) -> int:
        """Bytes in the longest form looked for: a stream scrubber never holds back more than one less."""
        return max(map(len, self._swaps), default=0)

    @property
    def forms(self) -> frozenset[bytes]:
        """Every byte form looked for (real values and their encodings): for a stream scrubber's hold-back,
        never to be shown anywhere."""
        return frozenset(self._swaps)

    def scrub(self, data: bytes) -> tuple[bytes, int]:
        """`data` with every form replaced, and how many replacements were made."""
        if self._pattern is None or not data:
            return data, 0
        total = 0
        for _ in range(_MAX_PASSES):
            data, count = self._pattern.subn(lambda m: self._swaps[m.group(0)], data)
            total += count
            if count == 0 or self._pattern.search(data) is None:
                return data, total
        raise Unscrubbable("echoes of a secret remain after scrubbing")

    def check_readings(self, data: bytes) -> None:
        """Raises Unscrubbable when any decoder's reading of `data` (unescape.py) holds a real value."""
        if self._hidden is None or not data:
            return
        if read_as_is(data):  # the common case in a stream's piece: one reading, the text itself
            if self._hidden.search(data.decode("utf-8", "surrogateescape")):
                raise Unscrubbable("an escaped or re-encoded echo of a secret")
            return
        for text in readings(data):
            if self._hidden.search(text):
                raise Unscrubbable("an escaped or re-encoded echo of a secret")

    def scrub_fields(self, fields: tuple[tuple[bytes, bytes], ...]) -> tuple[tuple, int]:
        out, total = [], 0
        for name, value in fields:
            new_name, a = self.scrub(name)
            new_value, b = self.scrub(value)
            out.append((new_name, new_value))
            total += a + b
        return tuple(out), total

    def scrub_response(self, response: http.Response) -> int:
        """Scrub in place; returns how many occurrences were replaced. Raises Unscrubbable, leaving the
        response to be replaced by the caller, when the body cannot be decoded."""
        if self._pattern is None:
            return 0
        total = 0
        te = [v.strip().lower() for v in response.headers.get_all("transfer-encoding")]
        if any(v != "chunked" for v in te):
            # mitmproxy forwards a gzip/deflate transfer-coded body still compressed; it cannot be checked.
            raise Unscrubbable("transfer-coded body")
        if response.raw_content:
            try:
                body = bounded_content(response, self._max_decoded)
            except DecodeRefused as exc:
                raise Unscrubbable(str(exc)) from None
            new_body, count = self.scrub(body or b"")
            self.check_readings(new_body)
            if count:
                response.set_content(new_body)
                total += count
        fields, count = self.scrub_fields(response.headers.fields)
        for _name, value in fields:
            self.check_readings(value)
        if count:
            response.headers.fields = fields
            total += count
        if response.trailers is not None:
            fields, count = self.scrub_fields(response.trailers.fields)
            if count:
                response.trailers.fields = fields
                total += count
        if response.data.reason:
            reason, count = self.scrub(response.data.reason)
            if count:
                response.data.reason = reason
                total += count
        return total


def scrubber_for(replace: Iterable[tuple[str, str]], inject: Iterable[tuple[str, str]],
                 built: Iterable[tuple[str, str]] = (),
                 max_decoded_bytes: int = DEFAULT_MAX_DECODED) -> Scrubber | None:
    """The scrubber for a flow that received secrets, or None when it received none. An injected value
    that holds no real value the decision paired with a sentinel is scrubbed whole (REDACTED)."""
    pairs = [(sentinel, real) for sentinel, real in replace if real]
    reals = [real for _sentinel, real in pairs]
    whole = [value for _header, value in inject if value and not any(real in value for real in reals)]
    built = list(built)
    # A whole injected header value ("Bearer <value>") echoed base64-encoded comes back cleanly too.
    for _header, value in inject:
        fake = value
        for sentinel, real in pairs:
            fake = fake.replace(real, sentinel)
        if fake != value:
            built.append((value, fake))
    if not (pairs or whole or built):
        return None
    return Scrubber(pairs, built, whole, max_decoded_bytes)


def scrub_echoes(flow: http.HTTPFlow, decision_id: str | None) -> str:
    """Scrub echoes of the flow's injected secrets from its response (in place); an unscrubbable
    response is withheld (502). Returns the outcome's error text ("" when the response went through)."""
    scrubber = flow.metadata.get("roster_scrubber")
    if flow.websocket is None or flow.response.status_code != 101:
        flow.metadata.pop("roster_scrubber", None)  # a websocket keeps it for its messages
    if scrubber is None:
        return ""
    if flow.response.status_code == 206 or "content-range" in flow.response.headers:
        deny_flow(flow, 502, "policy_error",
                  "the upstream sent a partial response to a request that carried a secret; withheld because "
                  "a slice of an echoed secret cannot be found by scrubbing", decision_id=decision_id or "")
        return "response withheld: partial content on a secret-carrying request"
    try:
        scrubbed = scrubber.scrub_response(flow.response)
    except Exception as exc:  # noqa: BLE001 - unknown encoding or anything else: withhold the response
        log.warning("response to %s withheld: not checkable for echoed secrets (%s)", decision_id,
                    type(exc).__name__)
        deny_flow(flow, 502, "policy_error",
                  "the upstream response could not be checked for an echoed secret, so it was withheld",
                  decision_id=decision_id or "")
        return "response withheld: could not be checked for an echoed secret"
    if scrubbed:
        # The count and names only, never a value; the outcome carries the count to the control plane,
        # which audits it as a tripwire (the upstream echoed a secret).
        log.warning("scrubbed %d echo(es) of an injected secret from the response to %s (grant %s)",
                    scrubbed, decision_id, flow.metadata.get("roster_grant"))
    flow.metadata["roster_scrubbed"] = scrubbed
    return ""


# mitmproxy error messages that quote the upstream's raw bytes (and its error page shows them to the box).
_QUOTES_UPSTREAM = ("unexpected server response", "cannot parse http response")


def scrub_error(flow: http.HTTPFlow, scrubber) -> str:
    """An upstream failure on a flow that received a secret: mitmproxy's error page (and its logs) would
    quote the message, which may quote the upstream's bytes. Scrub the message; if it echoed a secret or
    quotes raw upstream bytes (whose escaping the scrubber may not know), kill the flow so that no error
    page is sent: the box sees the connection close. Returns the scrubbed message."""
    try:
        scrubbed, count = scrubber.scrub(flow.error.msg.encode("utf-8", "surrogateescape"))
        message = scrubbed.decode("utf-8", "surrogateescape")
        flow.metadata["roster_scrubbed"] = count  # echoes found, reported with the outcome
    except Exception:  # noqa: BLE001 - whatever went wrong, the message is not shown to anyone
        message, count = "upstream error (message withheld: it could not be checked for secrets)", 1
    flow.error.msg = message
    if (count or message.lower().startswith(_QUOTES_UPSTREAM)) and flow.killable:
        log.warning("upstream error on a flow that carried a secret%s; closing without an error page",
                    " (it echoed the secret)" if count else "")
        flow.kill()
    return message
