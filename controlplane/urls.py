from django.contrib import admin
from django.urls import include, path

from controlplane.api import api
from controlplane.egress.gateway_calls import ROUTES as GATEWAY_CALLS
from controlplane.egress.gateway_calls import django_view as gateway_call

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    # The gateway's per-request calls for a WSGI caller; under ASGI they never reach Django
    # (controlplane.egress.asgi).
    *(path(route.removeprefix("/"), gateway_call) for route in GATEWAY_CALLS),
    path("api/", api.urls),
    path("", include("controlplane.web.urls")),
]
