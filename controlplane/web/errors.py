"""The page a signed-in person sees when a page is not theirs: it says whether their account has no role at
all (the usual first-day case) or a role that does not cover this page, and lets them sign out."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from controlplane.core.roles import ADMINS, APPROVERS, AUDITORS


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    user = request.user
    roles = []
    if user.is_authenticated:
        groups = user.groups.filter(name__in=[ADMINS, APPROVERS, AUDITORS])
        roles = sorted(groups.values_list("name", flat=True))
    no_role = user.is_authenticated and not roles and not user.is_superuser
    return render(request, "403.html", {"no_role": no_role, "roles": roles or ["superuser"]}, status=403)
