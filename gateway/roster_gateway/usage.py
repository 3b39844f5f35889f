"""Token usage read from model responses as they pass, in every shape the gateway meters: OpenAI chat
completions (one JSON body, or SSE where usage rides on the last chunk whatever its `choices`), the
OpenAI Responses API (`response.completed`), Anthropic Messages (`message_start` + `message_delta`),
Gemini's generateContent (`usageMetadata` on the response; streamed, on every SSE event or every element
of the JSON array, cumulative, so the last one read is the call's).

Nothing here holds a response back: a meter keeps at most the one SSE event it is reading (bounded), and
a JSON body is read from what the gateway already holds for scrubbing. A response whose usage cannot be
read (cut off, malformed, an unknown shape) is `known=False`: the control plane settles it at the
reserved worst case and flags it in the audit record."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from roster_gateway.model_calls import CHAT, GEMINI, MESSAGES, RESPONSES

MAX_TOKENS = 2**53  # a count above this is malformed, not a bill
# An SSE event is small (one chunk of text) except the Responses API's final event, which repeats the
# whole answer; one larger than this is not read (its usage is then unknown and settles at worst case).
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Usage:
    """Normalised counts: `input` includes `cached_input` (cache reads) and `cache_write` (cache writes,
    priced apart: Anthropic bills them above the input rate), which includes `cache_write_1h` (writes to
    the 1-hour cache, billed higher still); `output` includes `reasoning`."""

    known: bool
    model: str = ""
    input: int = 0
    cached_input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    problem: str = ""  # why usage is unknown: "cut off", "malformed", "unknown shape", ...

    def as_wire(self) -> dict:
        wire = {"known": self.known, "model": self.model[:200], "input": self.input,
                "cached_input": self.cached_input, "output": self.output, "reasoning": self.reasoning,
                "problem": self.problem[:200]}
        if self.cache_write:
            # Only when there are any: a control plane from before these fields refuses unknown keys, and
            # would refuse the whole batch of outcomes with them (docs/wire.md).
            wire.update(cache_write=self.cache_write, cache_write_1h=self.cache_write_1h)
        return wire


def unknown(problem: str, model: str = "") -> Usage:
    return Usage(known=False, model=model, problem=problem)


class Malformed(ValueError):
    pass


def _count(doc: dict, *path: str) -> int:
    """A token count at `path` (0 when a detail is absent); anything but a sane integer is Malformed."""
    value: object = doc
    for key in path:
        if not isinstance(value, dict):
            raise Malformed("usage detail is not an object")
        value = value.get(key)
        if value is None:
            return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise Malformed(f"token count {'.'.join(path)} is not a non-negative integer")
    return value


# (input, cache reads, output, reasoning, cache writes, 1-hour cache writes), as _checked takes them
Counts = tuple[int, int, int, int, int, int]
# (input, cache reads, cache writes, 1-hour cache writes): the input side of an Anthropic usage object
AnthropicInput = tuple[int, int, int, int]


def _openai_chat(usage: dict) -> Counts:
    return (_count(usage, "prompt_tokens"), _count(usage, "prompt_tokens_details", "cached_tokens"),
            _count(usage, "completion_tokens"),
            _count(usage, "completion_tokens_details", "reasoning_tokens"), 0, 0)


def _openai_responses(usage: dict) -> Counts:
    return (_count(usage, "input_tokens"), _count(usage, "input_tokens_details", "cached_tokens"),
            _count(usage, "output_tokens"), _count(usage, "output_tokens_details", "reasoning_tokens"), 0, 0)


def _anthropic_input(usage: dict) -> AnthropicInput:
    """Anthropic counts cache reads and cache writes apart from `input_tokens`; all three are input. A
    cache write's split by cache lifetime (`cache_creation`) is optional; without it every write counts
    as a write to the 5-minute cache."""
    cached = _count(usage, "cache_read_input_tokens")
    written = _count(usage, "cache_creation_input_tokens")
    written_1h = _count(usage, "cache_creation", "ephemeral_1h_input_tokens")
    if _count(usage, "cache_creation", "ephemeral_5m_input_tokens") + written_1h > written:
        raise Malformed("the cache writes by lifetime exceed the cache writes")
    return _count(usage, "input_tokens") + cached + written, cached, written, written_1h


def _gemini(meta: dict) -> Counts:
    """Gemini's usageMetadata: `promptTokenCount` includes the cached content's tokens; tool-use prompt
    tokens are input too; thinking tokens are output, billed as output, and not in
    `candidatesTokenCount`. A `totalTokenCount` above the sum holds a count this reader does not know of:
    the rest is taken as output (the dearer side), so a call is never settled below what Google counts."""
    total_in = _count(meta, "promptTokenCount") + _count(meta, "toolUsePromptTokenCount")
    thoughts = _count(meta, "thoughtsTokenCount")
    output = _count(meta, "candidatesTokenCount") + thoughts
    output += max(_count(meta, "totalTokenCount") - total_in - output, 0)
    return total_in, _count(meta, "cachedContentTokenCount"), output, thoughts, 0, 0


def _gemini_json(doc: object, request_model: str) -> Usage:
    """A whole generateContent answer, or streamGenerateContent's JSON array of them (without alt=sse)."""
    parts = doc if isinstance(doc, list) else [doc]
    if not all(isinstance(part, dict) for part in parts):
        return unknown("malformed", request_model)
    meta: dict | None = None
    model = request_model
    for part in parts:
        model = _model_version(part, model)
        if isinstance(part.get("usageMetadata"), dict):
            meta = _overlaid(meta, part["usageMetadata"])
    if meta is None:
        return unknown("no usage in response", model)
    try:
        return _checked(model, _gemini(meta))
    except Malformed as exc:
        return unknown(f"malformed: {exc}", model)


def _model_version(doc: dict, fallback: str) -> str:
    version = doc.get("modelVersion")
    return version if isinstance(version, str) and version else fallback


def _is_count(value: object) -> bool:
    # Anything else (a negative or absurd number too) is left for _count to refuse as malformed.
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS


def _overlaid(before: dict | None, delta: dict) -> dict:
    """The usage reported so far (message_start's, then every message_delta's) with one more delta laid
    over it. Counts are cumulative, so each is the larger of the two: a count the delta leaves out, sends
    as null or sends lower keeps its earlier value (a delta's usage has no lifetime split of the cache
    writes; the earlier split stands, key by key). Anything that is not a count is the delta's, for the
    checks to judge."""
    merged = dict(before or {})
    for key, value in delta.items():
        earlier = merged.get(key)
        if value is None:
            continue
        if key == "cache_creation" and isinstance(value, dict) and isinstance(earlier, dict):
            value = _overlaid(earlier, value)
        elif _is_count(value) and _is_count(earlier):
            value = max(earlier, value)
        merged[key] = value
    return merged


def _anthropic_counts(given: AnthropicInput, output: int) -> Counts:
    total_in, cached, written, written_1h = given
    return total_in, cached, output, 0, written, written_1h


def _checked(model: str, counts: Counts) -> Usage:
    total_in, cached, output, reasoning, written, written_1h = counts
    if cached + written > total_in or reasoning > output or written_1h > written:
        raise Malformed("a detail count exceeds its total")
    return Usage(known=True, model=model, input=total_in, cached_input=cached, output=output,
                 reasoning=reasoning, cache_write=written, cache_write_1h=written_1h)


def _model(doc: dict, fallback: str) -> str:
    model = doc.get("model")
    return model if isinstance(model, str) and model else fallback


def usage_from_json(api: str, body: bytes, request_model: str = "") -> Usage:
    """Usage of a whole (not streamed) JSON response."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return unknown("malformed", request_model)
    if api == GEMINI:
        return _gemini_json(doc, request_model)
    if not isinstance(doc, dict) or not isinstance(doc.get("usage"), dict):
        return unknown("no usage in response", request_model)
    model = _model(doc, request_model)
    try:
        if api == CHAT:
            return _checked(model, _openai_chat(doc["usage"]))
        if api == RESPONSES:
            return _checked(model, _openai_responses(doc["usage"]))
        if api == MESSAGES:
            given = _anthropic_input(doc["usage"])
            return _checked(model, _anthropic_counts(given, _count(doc["usage"], "output_tokens")))
    except Malformed as exc:
        return unknown(f"malformed: {exc}", model)
    return unknown("unknown shape", model)


# --- SSE ---
# An event ends at an empty line; a line ends with CRLF, LF or CR (a lone CR at the end of what has
# arrived may be the first half of a CRLF, so it is not taken as a line end yet).
_EVENT_END = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?=[^\n]))")


class SseSplitter:
    """Cuts a byte stream into whole SSE events (each with its terminator), bytes unchanged."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._pending = b""
        self._max = max_event_bytes
        self._cr = False  # a CR seen: line ends may be CR or CRLF from here on
        self.overflowed = False

    def feed(self, data: bytes) -> list[bytes]:
        # What was pending held no event end; one can only begin in its last few bytes (a terminator is
        # at most 4 bytes with its look-ahead), so only those are read again.
        rescan = max(len(self._pending) - 4, 0)
        buffer = self._pending + data if self._pending else data
        events, start = [], 0
        self._cr = self._cr or b"\r" in data
        if not self._cr:
            # Without CR an event end is exactly LF LF: a plain search finds the same ends as the pattern.
            end = buffer.find(b"\n\n", rescan)
            while end >= 0:
                events.append(buffer[start:end + 2])
                start = end + 2
                end = buffer.find(b"\n\n", start)
        else:
            for match in _EVENT_END.finditer(buffer, rescan):
                events.append(buffer[start:match.end()])
                start = match.end()
        self._pending = buffer[start:] if start else buffer
        if len(self._pending) > self._max:
            self.overflowed = True
        return events

    def take_rest(self) -> bytes:
        rest, self._pending = self._pending, b""
        return rest


_LINE_END = re.compile(rb"\r\n|\n|\r")


def parse_event(raw: bytes) -> tuple[str, str]:
    """(event name, data) of one SSE event; data lines joined with LF, one leading space dropped."""
    name, data = "", []
    for line in (raw.split(b"\n") if b"\r" not in raw else _LINE_END.split(raw)):
        field, sep, value = line.partition(b":")
        if not sep:
            continue
        if value.startswith(b" "):
            value = value[1:]
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value.decode("utf-8", "replace"))
    return name, "\n".join(data)


# What an event must hold, as bytes, to carry anything the meter reads, per API: usage and the end marker
# (chat completions), the final event types (Responses), the message_* events (Messages). JSON spells a
# key's or a string's letters either literally or as \u escapes, and every data line is a piece of the
# event's bytes, so an event holding none of these (and no \u escape) cannot carry usage.
_CARRIERS = {CHAT: (b"usage", b"[DONE]"),
             RESPONSES: (b"response.completed", b"response.incomplete", b"response.failed"),
             MESSAGES: (b"message_",), GEMINI: (b"usageMetadata", b"finishReason")}
_NO_USAGE = b'"usage":null'  # on every chat chunk of a stream that asked for usage, but its last


class StreamMeter:
    """Reads usage from one SSE response, event by event."""

    def __init__(self, api: str, request_model: str = "") -> None:
        self.api = api
        self.model = request_model
        self._counts: Counts | None = None
        self._anthropic_usage: dict | None = None  # message_start's usage, every delta laid over it
        self._gemini_usage: dict | None = None  # every event's usageMetadata laid over the ones before
        self._problem = ""
        self._carriers = _CARRIERS.get(api, ())
        self._first = True
        self.finished = False  # the shape's end marker arrived ([DONE], response.*, message_stop)

    def may_carry_usage(self, raw: bytes) -> bool:
        """Whether an event must be read (parsed): only those that can carry usage or the end marker are,
        and the first (it names the model; a stream that is not JSON is malformed from its start). The
        others pass unparsed: per event, parsing JSON would cost more than the proxy's own work."""
        if self._first or b"\\u" in raw:
            self._first = False
            return True
        if self.api == CHAT and b"usage" in raw:
            return raw.count(b"usage") != raw.count(_NO_USAGE) or b"[DONE]" in raw
        return any(marker in raw for marker in self._carriers)

    def fail(self, problem: str) -> None:
        self._problem = self._problem or problem

    def observe(self, name: str, data: str, *, unterminated: bool = False) -> dict | None:
        """Read one event; returns its parsed JSON object (None for [DONE] or anything unreadable).
        `unterminated`: what was left when the stream ended without the event's blank line."""
        if self._problem:
            return None
        if data == "[DONE]":
            self.finished = True
            return None
        if not data:
            return None
        try:
            doc = json.loads(data)
        except ValueError:
            self.fail("cut off mid-event" if unterminated else "malformed event")
            return None
        if not isinstance(doc, dict):
            self.fail("malformed event")
            return None
        try:
            self._observe(doc)
        except Malformed as exc:
            self.fail(f"malformed: {exc}")
        return doc

    def _observe(self, doc: dict) -> None:
        if self.api == CHAT:
            self.model = _model(doc, self.model)
            if isinstance(doc.get("usage"), dict):  # on the last chunk, whatever its choices
                self._counts = _openai_chat(doc["usage"])
        elif self.api == RESPONSES:
            kind = doc.get("type")
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                response = doc.get("response")
                if isinstance(response, dict):
                    self.model = _model(response, self.model)
                    if isinstance(response.get("usage"), dict):
                        self._counts = _openai_responses(response["usage"])
                self.finished = True
        elif self.api == MESSAGES:
            kind = doc.get("type")
            if kind == "message_start" and isinstance(doc.get("message"), dict):
                message = doc["message"]
                self.model = _model(message, self.model)
                if isinstance(message.get("usage"), dict):
                    _anthropic_input(message["usage"])  # malformed counts fail here, not at the end
                    self._anthropic_usage = message["usage"]
            elif kind == "message_delta" and isinstance(doc.get("usage"), dict):
                # Cumulative; newer streams repeat the input counts here.
                usage = _overlaid(self._anthropic_usage, doc["usage"])
                given = _anthropic_input(usage)
                if self._anthropic_usage is None and given[0] == 0:
                    raise Malformed("message_delta before message_start")
                self._anthropic_usage = usage
                self._counts = _anthropic_counts(given, _count(usage, "output_tokens"))
            elif kind == "message_stop":
                self.finished = True
        elif self.api == GEMINI:
            self.model = _model_version(doc, self.model)
            if isinstance(doc.get("usageMetadata"), dict):
                self._gemini_usage = _overlaid(self._gemini_usage, doc["usageMetadata"])
                self._counts = _gemini(self._gemini_usage)
            candidates = doc.get("candidates")
            if isinstance(candidates, list) and any(
                    isinstance(c, dict) and c.get("finishReason") for c in candidates):
                self.finished = True  # Gemini's stream has no end marker but a candidate's finishReason

    def result(self) -> Usage:
        if self._problem:
            return unknown(self._problem, self.model)
        if self._counts is None and self.finished:
            # The stream ended properly, with its end marker: nothing was cut, the response simply carried
            # no usage (a chat stream that did not ask for stream_options.include_usage, say).
            return unknown("no usage: the stream finished with its end marker but reported none", self.model)
        if self._counts is None:
            return unknown("cut off: the stream ended before its usage", self.model)
        try:
            return _checked(self.model, self._counts)
        except Malformed as exc:
            return unknown(f"malformed: {exc}", self.model)
