"""The control plane's HTTP API. One router per app; the gateway's routes sit under /api/gateway/."""

from ninja import NinjaAPI

api = NinjaAPI(title="Roster control plane", version="1", urls_namespace="api")


def _mount_routers() -> None:
    from controlplane.egress.routes import router as gateway_router
    from controlplane.proposals.api import router as proposals_router

    api.add_router("/gateway/", gateway_router)
    api.add_router("/gateway/", proposals_router)


_mount_routers()
