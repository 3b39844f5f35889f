"""One scripted step in Gemini's wire format (generateContent, as the Gemini API reference and the
@google/genai SDK read it): a whole GenerateContentResponse, or the pieces of streamGenerateContent, sent
as SSE with `?alt=sse` and as one JSON array without it. Every piece carries `usageMetadata`, the
prompt's count from the first and the whole call's on the last, as Google's servers send them."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator

from tools.scripted_model.formats import PIECE, usage_numbers
from tools.scripted_model.script import Step

# /v1beta/models/<model>:generateContent, :streamGenerateContent (also /v1/, and tuned models)
ROUTE = re.compile(r"^/v1(?:beta)?/(?:models|tunedModels)/([^/:]+):(generateContent|streamGenerateContent)$")


def route(path: str) -> tuple[str, bool] | None:
    """(model, streamed) of a Gemini generate path, else None."""
    match = ROUTE.match(path.split("?", 1)[0])
    return (match.group(1), match.group(2) == "streamGenerateContent") if match else None


def turns(body: dict) -> int:
    """The model turns a conversation already holds: `contents` entries with role "model"."""
    contents = body.get("contents") or []
    return sum(1 for c in contents if isinstance(c, dict) and c.get("role") == "model")


def _usage(prompt: int, candidates: int | None) -> dict:
    meta = {"promptTokenCount": prompt, "totalTokenCount": prompt + (candidates or 0),
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    if candidates is not None:
        meta["candidatesTokenCount"] = candidates
    return meta


def _piece(parts: list[dict], usage: dict, model: str, response_id: str, finish: bool) -> dict:
    candidate: dict = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"  # Gemini says STOP after function calls too
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
            "responseId": response_id}


def _call_parts(step: Step) -> list[dict]:
    return [{"functionCall": {"id": f"call_{secrets.token_hex(6)}", "name": c.name, "args": c.arguments}}
            for c in step.calls]


def response(step: Step, model: str, request_bytes: bytes) -> dict:
    prompt, completion = usage_numbers(step, request_bytes)
    parts = ([{"text": step.say}] if step.say else []) + _call_parts(step)
    return _piece(parts, _usage(prompt, completion), model, secrets.token_hex(8), True)


def pieces(step: Step, model: str, request_bytes: bytes) -> list[dict]:
    prompt, completion = usage_numbers(step, request_bytes)
    response_id, early = secrets.token_hex(8), _usage(prompt, None)
    text = [step.say[i:i + PIECE] for i in range(0, len(step.say), PIECE)]
    out = [_piece([{"text": t}], early, model, response_id, False) for t in text]
    # The last piece: the function calls (Gemini sends each call whole, never in deltas) and the usage.
    last_parts = _call_parts(step) or [{"text": ""}]
    out.append(_piece(last_parts, _usage(prompt, completion), model, response_id, True))
    return out


def sse_stream(step: Step, model: str, request_bytes: bytes) -> Iterator[bytes]:
    for piece in pieces(step, model, request_bytes):
        yield b"data: " + json.dumps(piece, separators=(",", ":")).encode() + b"\r\n\r\n"


def array_stream(step: Step, model: str, request_bytes: bytes) -> Iterator[bytes]:
    """Without alt=sse: `[`, the pieces separated by `,`, `]`, as the array arrives in chunks."""
    for index, piece in enumerate(pieces(step, model, request_bytes)):
        yield (b"[" if index == 0 else b"\r\n,") + json.dumps(piece, indent=2).encode()
    yield b"]"
