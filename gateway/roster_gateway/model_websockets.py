"""WebSockets toward model APIs are refused (issue 23.5): model traffic in WebSocket frames is not metered
(the ledger meters HTTP responses and SSE streams: roster_gateway.metering), and unmetered model
traffic is never let through. An agent that tries one first (Codex's Responses over WebSocket) is told
why, in a final refusal, and falls back to HTTP, which is metered.

A WebSocket is a model API's when its path is one (chat completions, Responses, messages, OpenAI's
realtime, Gemini's generate and live methods), refused before /decide, or when the control plane says
the host speaks a model wire format (a grant names it with `wire`), refused after it, whatever the path."""

from __future__ import annotations

from mitmproxy import http

REASON, STATUS = "protocol_refused", 403
_MODEL_PATHS = ("/chat/completions", "/responses", "/messages", "/realtime")
_MODEL_METHODS = ("generatecontent", "bidigeneratecontent")
MESSAGE = ("a WebSocket to a model API is refused: Roster meters model calls over HTTP (and SSE streams) "
           "only, never frames; use the HTTP API")


def is_upgrade(request: http.Request) -> bool:
    return request.headers.get("upgrade", "").strip().lower() == "websocket"


def is_model_api_path(path: str) -> bool:
    bare = path.split("?", 1)[0].rstrip("/").lower()
    return bare.endswith(_MODEL_PATHS) or any(m in bare.rsplit("/", 1)[-1] for m in _MODEL_METHODS)


def refused_before_deciding(request: http.Request) -> bool:
    """A WebSocket upgrade of a model API path: refused without asking."""
    return is_model_api_path(request.path) and is_upgrade(request)


def refused_on_model_host(request: http.Request, wire: str) -> bool:
    """A WebSocket upgrade to a host the control plane says speaks a model wire format."""
    return bool(wire) and is_upgrade(request)
