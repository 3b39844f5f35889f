"""The control plane's HTTP API. One router per app; the gateway's routes sit under /api/gateway/."""

from ninja import NinjaAPI
from ninja.errors import ValidationError

from controlplane.egress.proposals import router as proposals_router
from controlplane.egress.routes import router as gateway_router

api = NinjaAPI(title="Roster control plane", version="1", urls_namespace="api")

# Longest field description in a 422: enough to name the field and the rule, never a value.
_MAX_FIELD_TEXT = 200


def _field(loc) -> str:
    """A field's dotted name as a client wrote it: the leading "body"/"query"/"path" and the handler's
    parameter name are this server's internals (docs/wire.md)."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[2:] if parts[0] == "body" and len(parts) > 1 else parts[1:]
    return ".".join(parts) or "(request)"


@api.exception_handler(ValidationError)
def _invalid_request(request, exc: ValidationError):
    # Only field names and the broken rule: never the input (it may hold a token or a sentinel), never
    # the framework's error shapes.
    fields = sorted({f"{_field(e.get('loc', ()))}: {e.get('msg', 'invalid')}"[:_MAX_FIELD_TEXT]
                     for e in exc.errors if isinstance(e, dict)})
    return api.create_response(request, {"detail": "invalid request", "fields": fields}, status=422)


api.add_router("/gateway/", gateway_router)
api.add_router("/gateway/", proposals_router)
