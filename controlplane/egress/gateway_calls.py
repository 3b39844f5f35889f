"""POST /api/gateway/decide and /outcomes, the two calls the gateway makes for every request it forwards,
and /journal, which follows a journaled model call's answer (controlplane.egress.journal_route): one route
each, answered straight from the ASGI server (controlplane.egress.asgi) without a Django request,
middleware, URL resolving or django-ninja, which together cost as much as the decision itself
(docs/operations.md, "Benchmarks"). Every answer is made here, refusals included, in the shapes the rest of
the gateway API answers with (docs/wire.md): 405 another method, 400 a body over Django's upload limit or
not JSON, 401 anything but the gateway's bearer token, 422 a body the schema refuses.

Django's URL conf names the same routes (controlplane.urls, `django_view`) for a WSGI caller, which
is what the test client is; the answer is this module's either way."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel, ValidationError

from controlplane.core.refusals import invalid_request_body
from controlplane.core.service_token import is_gateway_token
from controlplane.egress import outcomes
from controlplane.egress.budget_wait import SETTLED, decide_waiting
from controlplane.egress.db_thread import on_db_thread
from controlplane.egress.decide import decide
from controlplane.egress.journal_route import JournalIn, journal_answer
from controlplane.egress.request import EgressRequest
from controlplane.egress.schemas import DecideIn, OutcomesIn
from controlplane.egress.wire import decided_body

JSON_TYPE = b"application/json; charset=utf-8"


def egress_request(body: DecideIn) -> EgressRequest:
    return EgressRequest(
        token=body.token, method=body.method, scheme=body.scheme, host=body.host, port=body.port,
        path=body.path,
        headers=tuple(body.headers), body_size=body.body_size, body_sha256=body.body_sha256,
        body_preview=body.body_preview, mcp=tuple((m.method, m.tool) for m in body.mcp),
        sentinels=tuple(body.sentinels),
        model_call=body.model_call.facts() if body.model_call else None, client=body.client,
    )


def outcome_items(body: OutcomesIn) -> list[tuple]:
    return [(o.decision_id, o.status, o.request_bytes, o.response_bytes, o.error, o.scrubbed,
             o.usage.usage() if o.usage else None, o.response_sha256)
            for o in body.outcomes]


async def _decide(request, body: DecideIn) -> dict:
    started = time.perf_counter()
    req = egress_request(body)
    # A call refused only because calls in flight hold the budget's remainder waits for them to settle
    # (controlplane.egress.budget_wait), off the database thread.
    answer = await decide_waiting(lambda may_wait: on_db_thread(request, decide, req, may_wait))
    return decided_body(answer, time.perf_counter() - started)


async def _outcomes(request, body: OutcomesIn) -> dict:
    results = await on_db_thread(request, outcomes.outcomes_report, outcome_items(body))
    SETTLED.notify()  # calls waiting for budget these outcomes may have released try again
    return {"results": results}


@dataclass(frozen=True)
class Route:
    schema: type[BaseModel]
    answer: Callable[[object, BaseModel], Awaitable[dict]]


ROUTES = {
    "/api/gateway/decide": Route(DecideIn, _decide),
    "/api/gateway/outcomes": Route(OutcomesIn, _outcomes),
    "/api/gateway/journal": Route(JournalIn, journal_answer),
}


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    allow_post: bool = False  # a 405 names the one method the route takes


def _refusal(status: int, detail: str, **kwargs) -> Reply:
    return Reply(status, json.dumps({"detail": detail}).encode(), **kwargs)


TOO_LARGE = _refusal(400, "request body too large")


def _bearer_is_the_gateways(authorization: Sequence[str]) -> bool:
    # As an HTTP bearer scheme reads it (scheme case-insensitive, the rest is the token), from exactly one
    # Authorization header: two are refused, whichever of them is right.
    if len(authorization) != 1:
        return False
    parts = authorization[0].split(" ")
    return parts[0].lower() == "bearer" and is_gateway_token(" ".join(parts[1:]))


async def reply(route: Route, method: str, authorization: Sequence[str], body: bytes, request=None) -> Reply:
    """The answer to one call on `route`. `request`: the Django request for a WSGI caller, else None."""
    if method != "POST":
        return _refusal(405, "Method not allowed", allow_post=True)
    if len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return TOO_LARGE
    if not _bearer_is_the_gateways(authorization):
        return _refusal(401, "Unauthorized")
    try:
        payload = json.loads(body) if body else None
    except ValueError:
        return _refusal(400, "Cannot parse request body")
    if payload is None:
        return Reply(422, json.dumps(invalid_request_body([{"loc": (), "msg": "Field required"}])).encode())
    try:
        parsed = route.schema.model_validate(payload)
    except ValidationError as exc:
        return Reply(422, json.dumps(invalid_request_body(exc.errors(include_input=False))).encode())
    return Reply(200, json.dumps(await route.answer(request, parsed)).encode())


@csrf_exempt
async def django_view(request) -> HttpResponse:
    """The same routes for a WSGI caller (controlplane.urls)."""
    route = ROUTES[request.path]
    authorization = [request.META["HTTP_AUTHORIZATION"]] if "HTTP_AUTHORIZATION" in request.META else []
    try:
        body = request.body
    except RequestDataTooBig:
        answer = TOO_LARGE
    else:
        answer = await reply(route, request.method, authorization, body, request)
    response = HttpResponse(answer.body, status=answer.status, content_type=JSON_TYPE.decode())
    if answer.allow_post:
        response["Allow"] = "POST"
    return response
