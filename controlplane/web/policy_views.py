"""A worker's effective policy on one page (docs/web.md, "A worker's effective policy"): its agent (preset,
model), every grant that applies to it in the order the engine prefers them, the secrets those grants
inject (names only), its caps and the org's with what is spent and what calls in flight hold, its
channels, and "test a request" judged by the real engine on the stored grants. Reading only: a test writes
nothing."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from controlplane.agents.selectors import worker_agent_choice
from controlplane.conversations.selectors import channels_of_worker
from controlplane.core.errors import RosterError
from controlplane.fleet.models import Worker
from controlplane.ledger.in_flight import held_of
from controlplane.ledger.models import Cap
from controlplane.ledger.totals import scope_of, spent_for
from controlplane.policy import trial
from controlplane.policy.models import Grant
from controlplane.web.security import hardened

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT")
# The engine's preference among grants that match one request (controlplane.policy.engine): a matching
# deny always wins; otherwise the most specific target (an exact host over a wildcard, then the longer
# literal path), then the stricter mode.
_STRICTNESS = {"deny": 0, "ask": 1, "auto": 2}


@dataclass(frozen=True)
class CapRow:
    scope: str
    unit: str
    window: str
    limit: int
    spent: int
    held: int
    held_calls: int

    @property
    def left(self) -> int:
        return max(self.limit - self.spent, 0)


def _precedence(grant: Grant) -> tuple:
    wildcard = grant.host.startswith("*.")
    longest_path = max((len(p.replace("*", "")) for p in grant.paths or []), default=0)
    return (grant.mode != "deny", wildcard, -len(grant.host), -longest_path, _STRICTNESS.get(grant.mode, 3),
            grant.slug)


def grants_in_precedence(worker: Worker) -> list[Grant]:
    grants = Grant.objects.filter(Q(worker=worker) | Q(worker__isnull=True)).select_related("secret",
                                                                                         "worker")
    return sorted(grants, key=_precedence)


def cap_rows(worker: Worker) -> list[CapRow]:
    caps = list(Cap.objects.filter(Q(worker=worker) | Q(worker__isnull=True)).select_related("worker")
                .order_by("worker_id", "unit", "window"))
    now = timezone.now()
    spent = spent_for(caps, now)
    rows = []
    for cap in caps:
        held = held_of(cap, now)
        rows.append(CapRow(scope_of(cap), cap.unit, cap.window, cap.limit, spent[cap.pk], held.amount,
                           held.calls))
    return rows


def _trial(worker: Worker, query) -> dict | None:
    url = (query.get("url") or "").strip()
    if not url:
        return None
    method = (query.get("method") or "GET").upper()
    if method not in METHODS:
        return {"error": f"method must be one of {', '.join(METHODS)}", "url": url, "method": "GET"}
    headers = (query.get("headers") or "").splitlines()
    try:
        result = trial.try_request(worker, method, url, headers=headers)
    except RosterError as exc:
        return {"error": f"the test request is not valid: {exc}", "url": url, "method": method}
    return {"verdict": result.verdict, "lines": trial.explain(result), "url": url, "method": method,
            "headers": "\n".join(headers)}


@require_GET
@hardened
@login_required
@permission_required("policy.view_grant", raise_exception=True)
def worker_policy(request: HttpRequest, worker_id: int) -> HttpResponse:
    worker = get_object_or_404(Worker, pk=worker_id)
    grants = grants_in_precedence(worker)
    secrets = sorted({g.secret.name for g in grants if g.secret_id})
    return render(request, "web/worker_policy.html", {
        "worker": worker, "agent": worker_agent_choice(worker), "grants": grants, "secrets": secrets,
        "caps": cap_rows(worker), "channels": channels_of_worker(worker), "methods": METHODS,
        "trial": _trial(worker, request.GET), "now": timezone.now(),
    })
