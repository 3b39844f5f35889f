"""The control plane's HTTP API. One router per app; the gateway's routes sit under /api/gateway/."""

from ninja import NinjaAPI

from controlplane.egress.routes import router as gateway_router

api = NinjaAPI(title="Roster control plane", version="1", urls_namespace="api")
api.add_router("/gateway/", gateway_router)
