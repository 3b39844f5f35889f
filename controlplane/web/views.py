"""Overview, worker and run timeline pages, the run's answer sheet, plus the one stylesheet and script.
Views stay thin."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required, permission_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

from controlplane.approvals.cards import approval_cards_for_run
from controlplane.conversations.selectors import channels_of_worker, run_delivery, run_messages
from controlplane.core.taint import DataClass
from controlplane.dispatch.admission import queue_state
from controlplane.dispatch.answer_sheet import answer_sheet, answer_sheet_csv
from controlplane.fleet.models import Run, Worker
from controlplane.fleet.output import output_pieces, preview_pieces
from controlplane.ledger.models import Unit
from controlplane.ledger.selectors import cap_statuses
from controlplane.web import charts, selectors
from controlplane.web.journal_view import journal_turns
from controlplane.web.repair_views import repair_context
from controlplane.web.security import hardened

UNIT_LABELS = dict(Unit.choices)
STATIC_DIR = Path(__file__).resolve().parent / "static" / "web"
# Only these files are served; daphne has no static handler and we need just two small files.
ASSETS = {"roster.css": "text/css", "queue.js": "text/javascript"}


def _cap_statuses() -> list:
    rows = []
    for cap in cap_statuses():
        limit = int(cap.limit)
        spent = int(cap.spent)
        pct = 100 if limit <= 0 else min(100, spent * 100 // limit)
        unit = getattr(cap.unit, "value", cap.unit)
        rows.append({"scope": cap.scope, "unit": unit, "unit_label": UNIT_LABELS.get(unit, unit).lower(),
                     "window": getattr(cap.window, "value", cap.window), "limit": limit, "spent": spent,
                     "percent": pct, "over": spent >= limit, "high": limit * 8 // 10})
    return rows


@require_GET
@hardened
@login_required
@permission_required("fleet.view_worker", raise_exception=True)
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "web/overview.html", {
        "workers": selectors.workers_with_live_runs(),
        "live_runs": selectors.live_runs(),
        "pending_count": selectors.pending_approval_count(),
        "caps": _cap_statuses(),
        "spend_chart": charts.spend_chart(),
        "decisions_chart": charts.decisions_chart(),
        "cap_charts": charts.cap_charts(),
        "wait_chart": charts.wait_chart(),
    })


@require_GET
@hardened
@login_required
@permission_required("fleet.view_worker", raise_exception=True)
def worker_detail(request: HttpRequest, worker_id: int) -> HttpResponse:
    worker = get_object_or_404(Worker, pk=worker_id)
    return render(request, "web/worker.html", {
        "worker": worker,
        "runs": selectors.recent_runs(worker),
        "channels": channels_of_worker(worker),
        "queue": selectors.live_runs().filter(worker=worker).order_by("id"),
        "cap_charts": charts.cap_charts(worker),
        "spend_chart": charts.spend_chart(worker=worker, chart_id="worker-spend-chart"),
    })


@require_GET
@hardened
@login_required
@permission_required("fleet.view_run", raise_exception=True)
def run_timeline(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("worker", "filed_by"), pk=run_id)
    return render(request, "web/run_timeline.html", {
        "run": run,
        "queue": queue_state(run),
        "taint": DataClass(run.taint).label,
        "entries": selectors.run_timeline(run),
        "approvals": approval_cards_for_run(run),
        "chat_messages": run_messages(run),
        "delivery": run_delivery(run),
        "totals": selectors.run_totals(run),
        "decisions_chart": charts.run_decisions_chart(run),
        "spend_charts": charts.run_spend_charts(run),
        "traces": selectors.run_traces(run),
        "journal": journal_turns(run),
        "output": preview_pieces(output_pieces(run.output, run.output_sources),
                                 settings.ROSTER_WEB_OUTPUT_PREVIEW_CHARS),
        "output_cut": len(run.output) > settings.ROSTER_WEB_OUTPUT_PREVIEW_CHARS or run.output_truncated,
        "repair": repair_context(run, request.user),
    })


@require_GET
@cache_control(max_age=300)
def asset(request: HttpRequest, name: str) -> HttpResponse:
    if name not in ASSETS:
        raise Http404("no such file")
    response = FileResponse(open(STATIC_DIR / name, "rb"), content_type=ASSETS[name])  # noqa: SIM115
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
@hardened
@login_required
@permission_required("fleet.view_run", raise_exception=True)
def run_answers(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's answer sheet (docs/audit.md): the timeline's permission, its facts each linked to the
    audit record it stands on; `?format=json|csv` downloads the same facts as the CLI's export."""
    run = get_object_or_404(Run.objects.select_related("worker"), pk=run_id)
    sheet = answer_sheet(run)
    wanted = request.GET.get("format", "")
    if wanted in ("json", "csv"):
        body = (json.dumps(sheet, indent=2, ensure_ascii=False, sort_keys=True) if wanted == "json"
                else answer_sheet_csv(sheet))
        kind = "application/json" if wanted == "json" else "text/csv; charset=utf-8"
        response = HttpResponse(body, content_type=kind)
        response.headers["Content-Disposition"] = f'attachment; filename="run-{run.pk}-answers.{wanted}"'
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response
    if wanted:
        return HttpResponse("format must be json or csv", status=400, content_type="text/plain")
    return render(request, "web/run_answers.html", {"run": run, "sheet": sheet})
