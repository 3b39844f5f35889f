"""Which requests are model calls, what /decide is told about them (the facts the control plane needs to
reserve a call's worst case), and asking upstream for stream usage when the box did not.

A request is a model call when it POSTs a JSON object with a string `model` to a path of one of the
metered APIs, or a JSON object to Gemini's `models/<model>:generateContent` or `:streamGenerateContent`
(the model is named by the path there). Anything else is not metered by tokens (its grant's per-call
price and caps still apply); a box that phrases a model call so that this reading misses it sends a
body the upstream refuses too."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import unquote

CHAT, RESPONSES, MESSAGES, GEMINI = "chat", "responses", "messages", "gemini"
_PATH_SUFFIXES = (("/chat/completions", CHAT), ("/responses", RESPONSES), ("/messages", MESSAGES))
MAX_CHOICES = 128  # OpenAI's own limit on `n`; more is refused upstream, so more is malformed here
_USAGE_OPTION = b'"stream_options":{"include_usage":true},'
# Gemini's generate methods on a model or a tuned model (`/v1beta/models/gemini-2.5-flash:generateContent`);
# the streamed one answers SSE with `?alt=sse`, else one JSON array of the same response objects.
# Matched whatever the letters' case: a spelling that Google routes but this missed would go unmetered.
_GEMINI_PATH = re.compile(r"/(?:models|tunedmodels)/([^/:]+):(generatecontent|streamgeneratecontent)/?$",
                          re.IGNORECASE)
# Gemini's JSON parser (protobuf's) takes each field in camelCase and in snake_case alike.
_GEMINI_CONFIG = ("generationConfig", "generation_config")
_GEMINI_MAX_OUT = ("maxOutputTokens", "max_output_tokens")
_GEMINI_CANDIDATES = ("candidateCount", "candidate_count")


@dataclass(frozen=True)
class ModelCall:
    api: str
    model: str
    stream: bool
    max_output_tokens: int | None  # per answer, as the request asked; None: the model's ceiling
    choices: int  # answers asked for (chat `n`); the worst case multiplies output by it
    input_estimate: int  # an upper bound on input tokens: every token is at least one byte of the body
    asked_for_usage: bool  # a streamed chat call that asked for usage itself

    def as_wire(self) -> dict:
        return {"api": self.api, "model": self.model[:200], "stream": self.stream,
                "max_output_tokens": self.max_output_tokens, "choices": self.choices,
                "input_estimate": self.input_estimate}


def _api_of(path: str) -> str | None:
    bare = path.split("?", 1)[0].rstrip("/")
    for suffix, api in _PATH_SUFFIXES:
        if bare.endswith(suffix):
            return api
    return None


def _gemini_method(path: str) -> tuple[str, bool] | None:
    """(model, streamed) of a path naming one of Gemini's generate methods, else None."""
    bare = path.split("?", 1)[0]
    for _ in range(3):  # `%3A` for the colon, even escaped twice: read as the server that decodes it would
        bare, before = unquote(bare), bare
        if bare == before:
            break
    match = _GEMINI_PATH.search(bare)
    if match is None:
        return None
    return match.group(1), match.group(2).lower() == "streamgeneratecontent"


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _pairs_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")  # two readers could see two different requests
    return dict(pairs)


def model_call_of(method: str, path: str, body: bytes) -> ModelCall | None:
    """The model-call facts of a request, or None when it is not a model call."""
    if method.upper() != "POST":
        return None
    gemini = _gemini_method(path)
    api = GEMINI if gemini is not None else _api_of(path)
    if api is None or not body:
        return None
    try:
        doc = json.loads(body, object_pairs_hook=_pairs_without_duplicates)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if api == GEMINI and isinstance(doc, dict):
        return _gemini_call(gemini, doc, len(body))
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), str):
        return None
    if api == CHAT:
        asked = [_positive_int(doc.get(k)) for k in ("max_completion_tokens", "max_tokens")]
        max_out = max((a for a in asked if a is not None), default=None)
        choices = doc.get("n", 1)
        choices = choices if _positive_int(choices) and choices <= MAX_CHOICES else MAX_CHOICES
    else:
        max_out = _positive_int(doc.get("max_output_tokens" if api == RESPONSES else "max_tokens"))
        choices = 1
    options = doc.get("stream_options")
    asked_for_usage = isinstance(options, dict) and options.get("include_usage") is True
    return ModelCall(api=api, model=doc["model"], stream=doc.get("stream") is True, max_output_tokens=max_out,
                     choices=choices, input_estimate=len(body), asked_for_usage=asked_for_usage)


def _gemini_call(method: tuple[str, bool], doc: dict, size: int) -> ModelCall:
    """Gemini's facts: the model from the path, the output bound and answers from generationConfig. Both
    spellings of a field are read and the larger taken: which one Google obeys when a body holds both is
    not documented, and the reservation must cover either."""
    model, stream = method
    configs = [doc[k] for k in _GEMINI_CONFIG if isinstance(doc.get(k), dict)]
    asked = [_positive_int(c.get(k)) for c in configs for k in _GEMINI_MAX_OUT]
    max_out = max((a for a in asked if a is not None), default=None)
    choices = 1
    for config in configs:
        for key in _GEMINI_CANDIDATES:
            if key in config:
                count = config[key]
                count = count if _positive_int(count) and count <= MAX_CHOICES else MAX_CHOICES
                choices = max(choices, count)
    return ModelCall(api=GEMINI, model=model, stream=stream, max_output_tokens=max_out, choices=choices,
                     input_estimate=size, asked_for_usage=False)


def ask_for_stream_usage(call: ModelCall, body: bytes) -> bytes | None:
    """The body to send upstream so that a streamed chat completion reports its usage, or None when it
    already does (or is not a streamed chat call). Without `stream_options` the option is inserted
    after the opening brace, every other byte kept; otherwise the object is re-serialised with the
    option set (the box's own stream_options could say false or be malformed)."""
    if call.api != CHAT or not call.stream or call.asked_for_usage:
        return None
    if b"stream_options" not in body and b"\\u" not in body and b"\x00" not in body:
        # No member can be named stream_options (JSON spells a name's letters literally or as \u
        # escapes; NUL: a UTF-16 or UTF-32 body): no second parse of a body that may be large.
        start = body.index(b"{") + 1
        return body[:start] + _USAGE_OPTION + body[start:]
    doc = json.loads(body)
    if "stream_options" not in doc:
        start = body.index(b"{") + 1  # the object has a `model`, so a member follows the brace
        return body[:start] + _USAGE_OPTION + body[start:]
    options = doc["stream_options"] if isinstance(doc["stream_options"], dict) else {}
    doc["stream_options"] = {**options, "include_usage": True}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
