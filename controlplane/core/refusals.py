"""The one shape of a refused request body on every API (docs/wire.md): {"detail": "invalid request",
"fields": ["name: rule", ...]}. Only field names and the broken rule: never the input (it may hold a token
or a sentinel), never the framework's error shapes."""

from __future__ import annotations

from collections.abc import Iterable

# Longest field description: enough to name the field and the rule, never a value.
MAX_FIELD_TEXT = 200


def _field(loc, framework_loc: bool) -> str:
    """A field's dotted name as a client wrote it. In django-ninja's errors (`framework_loc`) the leading
    "body"/"query"/"path" and the handler's parameter name are this server's internals."""
    parts = [str(p) for p in loc]
    if framework_loc and parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[2:] if parts[0] == "body" and len(parts) > 1 else parts[1:]
    return ".".join(parts) or "(request)"


def invalid_request_body(errors: Iterable, *, framework_loc: bool = False) -> dict:
    """The 422 body for pydantic errors (dicts with "loc" and "msg"); `framework_loc`: django-ninja's,
    whose loc starts with where the value was read from."""
    fields = sorted({f"{_field(e.get('loc', ()), framework_loc)}: {e.get('msg', 'invalid')}"[:MAX_FIELD_TEXT]
                     for e in errors if isinstance(e, dict)})
    return {"detail": "invalid request", "fields": fields}
