"""The two calls the gateway makes for every request it forwards, POST /api/gateway/decide and
/outcomes, answered without Django's URL resolving and django-ninja's per-request machinery (which cost
as much as the decision itself: docs/operations.md, "Benchmarks").

Only a call that is sure to succeed is answered here: the gateway's bearer token in one Authorization
header, a body within Django's upload limit that the route's own schema accepts. Anything else goes on to
controlplane.egress.routes, which answers it (and every error) exactly as before. The bodies are those of
controlplane.egress.routes too (same schemas, same service functions, same wire dicts), so the wire
contract (docs/wire.md) is one contract; tests/egress/test_fast_routes.py compares the two byte for byte."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.conf import settings
from pydantic import BaseModel, ValidationError

from controlplane.core.service_token import is_gateway_token
from controlplane.egress import outcomes
from controlplane.egress.budget_wait import SETTLED, decide_waiting
from controlplane.egress.db_thread import in_group_asgi
from controlplane.egress.decide import decide, decide_grouped
from controlplane.egress.routes import egress_request, outcome_items
from controlplane.egress.schemas import DecideIn, OutcomesIn
from controlplane.egress.wire import decided_body

JSON_HEADERS = [(b"content-type", b"application/json; charset=utf-8")]


@dataclass(frozen=True)
class _Route:
    schema: type[BaseModel]
    answer: Callable[[BaseModel], Awaitable[dict]]


async def _decide(body: DecideIn) -> dict:
    started = time.perf_counter()
    req = egress_request(body)
    answer = await decide_waiting(lambda may_wait: in_group_asgi(decide, decide_grouped, req, may_wait))
    return decided_body(answer, time.perf_counter() - started)


async def _outcomes(body: OutcomesIn) -> dict:
    results = await in_group_asgi(outcomes.outcomes_report, outcomes.outcomes_grouped, outcome_items(body))
    SETTLED.notify()  # calls waiting for budget these outcomes may have released try again
    return {"results": results}


ROUTES = {
    "/api/gateway/decide": _Route(DecideIn, _decide),
    "/api/gateway/outcomes": _Route(OutcomesIn, _outcomes),
}


def _bearer_is_the_gateways(headers) -> bool:
    # As django-ninja's HttpBearer reads it (scheme case-insensitive, the rest is the token), but only
    # from a single Authorization header: anything unusual takes the ordinary route.
    values = [value for name, value in headers if name.lower() == b"authorization"]
    if len(values) != 1:
        return False
    parts = values[0].decode("latin-1").split(" ")
    return parts[0].lower() == "bearer" and is_gateway_token(" ".join(parts[1:]))


async def answer_fast(scope: dict, body: bytes) -> bytes | None:
    """The JSON answer (status 200) to a call this module takes, or None: the ordinary route answers."""
    route = ROUTES.get(scope.get("path", ""))
    if route is None or scope.get("method") != "POST":
        return None
    if len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE or not _bearer_is_the_gateways(scope["headers"]):
        return None
    try:
        payload = route.schema.model_validate(json.loads(body))
    except (ValueError, ValidationError):  # bad JSON or a refused field: the route says why
        return None
    return json.dumps(await route.answer(payload)).encode()
