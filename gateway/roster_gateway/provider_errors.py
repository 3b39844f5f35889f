"""A refusal in the error shape of the model provider the box is talking to, so the agent's SDK reads it.

The OpenAI, Anthropic and Gemini SDKs build the message an agent (and so its model) sees from the body's
`error` member; without one they say "403 status code (no body)" and the model never learns why. The
deny body keeps Roster's own keys (`verdict`, `reason`, `message`) and adds the provider's, picked by the
wire format the control plane says the host speaks (a grant's `wire`), else by the request itself.

A final refusal says so (`x-should-retry: false`, which the Stainless-built OpenAI and Anthropic SDKs
obey): the same request is refused again, so an agent's retry loop only repeats the refusal. A 5xx
(Roster's own failure) carries no such header: a retry may succeed."""

from __future__ import annotations

OPENAI_CHAT, OPENAI_RESPONSES = "openai-chat", "openai-responses"
ANTHROPIC, GEMINI = "anthropic-messages", "gemini"
WIRES = frozenset({OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI})

# google.rpc.Code names for the statuses a refusal has (Gemini's `error.status`).
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 402: "RESOURCE_EXHAUSTED", 403: "PERMISSION_DENIED",
                  407: "UNAUTHENTICATED", 413: "INVALID_ARGUMENT", 414: "INVALID_ARGUMENT",
                  431: "INVALID_ARGUMENT", 502: "UNAVAILABLE", 503: "UNAVAILABLE"}
_GEMINI_METHODS = (":generatecontent", ":streamgeneratecontent", ":counttokens", ":embedcontent",
                   "bidigeneratecontent")


def wire_of_request(method: str, path: str, headers) -> str:
    """The wire format a request's own shape names, when no grant says: Gemini's `models/…:method`
    paths or its key header, Anthropic's version header or messages path; else "" (OpenAI's shape)."""
    bare = path.split("?", 1)[0].lower()
    if any(m in bare for m in _GEMINI_METHODS) or "x-goog-api-key" in headers:
        return GEMINI
    if "anthropic-version" in headers or bare.rstrip("/").endswith("/v1/messages"):
        return ANTHROPIC
    return ""


def provider_error(wire: str, status: int, reason: str, message: str) -> dict:
    """The members to add to the deny body: the provider's error object, naming Roster's reason."""
    text = f"Roster refused this request ({reason}): {message}"
    kind = f"roster_{reason}"
    if wire == ANTHROPIC:
        return {"type": "error", "error": {"type": kind, "message": text}}
    if wire == GEMINI:
        status_name = _GOOGLE_STATUS.get(status, "PERMISSION_DENIED")
        return {"error": {"code": status, "message": text, "status": status_name}}
    # OpenAI's shape (chat completions and Responses alike) is also what most other SDKs read.
    return {"error": {"type": kind, "message": text, "code": reason, "param": None}}


def is_final(status: int) -> bool:
    """A refusal the same request would meet again (anything but Roster's own 5xx failures)."""
    return status < 500
