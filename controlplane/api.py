"""The control plane's HTTP API. One router per app; the gateway's routes sit under /api/gateway/."""

from ninja import NinjaAPI
from ninja.errors import ValidationError

from controlplane.core.refusals import invalid_request_body
from controlplane.egress.proposals import router as proposals_router
from controlplane.egress.routes import router as gateway_router

api = NinjaAPI(title="Roster control plane", version="1", urls_namespace="api")
# The gateway's per-request calls (/decide, /outcomes, /journal) are not here:
# controlplane.egress.gateway_calls.


@api.exception_handler(ValidationError)
def _invalid_request(request, exc: ValidationError):
    return api.create_response(request, invalid_request_body(exc.errors, framework_loc=True), status=422)


api.add_router("/gateway/", gateway_router)
api.add_router("/gateway/", proposals_router)
