"""The gateway's health on the web (`/gateway/`): whether it answers and agrees with the control plane,
and the operator's list of private upstreams it may dial (roster_private_upstreams), read live from its
health endpoint. The list is what decides whether a grant naming a loopback or private address, IP
literal or name, reaches anything (README, private upstreams; issue 27.2)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from controlplane.core.gateway_health import gateway_health
from controlplane.web.security import hardened


@require_GET
@hardened
@login_required
@permission_required("policy.view_grant", raise_exception=True)
def gateway_health_page(request: HttpRequest) -> HttpResponse:
    return render(request, "web/gateway_health.html", {"health": gateway_health(fresh=True)})
