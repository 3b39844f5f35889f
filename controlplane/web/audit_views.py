"""Auditor pages: browse the audit chain with filters, verify it, export the filtered view as CSV.
Auditors read and export; the only thing they can start is a verification, which changes no record."""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from controlplane.audit import checkpoints
from controlplane.audit.export import csv_rows
from controlplane.web.audit_filters import AuditFilterForm, kept_query
from controlplane.web.models import ChainCheck
from controlplane.web.security import hardened
from controlplane.web.selectors import audit_rows

VIEW_PERM = "audit.view_auditrecord"
EXPORT_PERM = "audit.export_auditrecord"


@require_GET
@hardened
@login_required
@permission_required(VIEW_PERM, raise_exception=True)
def audit_list(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    records = form.filtered()
    if form.newest_first():
        records = records.order_by("-seq")
    page = Paginator(records, settings.ROSTER_WEB_AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "web/audit_list.html", {
        "form": form, "page": page, "rows": audit_rows(page.object_list), "query": query.urlencode(),
        "here": kept_query(request.GET.urlencode()),
        "last_check": ChainCheck.objects.select_related("run_by").first(),
        "can_export": request.user.has_perm(EXPORT_PERM),
    })


@require_GET
@login_required
@permission_required(EXPORT_PERM, raise_exception=True)
def audit_export_csv(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return HttpResponse("bad filter: " + form.errors.as_text(), status=400, content_type="text/plain")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response = StreamingHttpResponse(csv_rows(form.filtered()), content_type="text/csv; charset=utf-8")
    response.headers["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@require_POST
@login_required
@permission_required(VIEW_PERM, raise_exception=True)
def audit_verify(request: HttpRequest) -> HttpResponse:
    back = _back_to_view(request)
    # Re-hashing the whole chain is expensive: one run per cooldown, whoever asks, so a loop of POSTs
    # cannot tie up the server. The last result stays on the page.
    last = ChainCheck.objects.order_by("-id").first()
    cooldown = timedelta(seconds=settings.ROSTER_WEB_VERIFY_COOLDOWN_SECONDS)
    if last is not None and timezone.now() - last.started_at < cooldown:
        messages.info(request, f"The chain was verified less than {cooldown.seconds} s ago; "
                               "showing that result.")
        return back
    started = time.monotonic()
    try:
        # Against the latest signed checkpoint, as `audit verify` does: a cut-off end or a re-chained
        # rewrite before it is a failure here too.
        result, note = checkpoints.verify_against_latest()
        ok, checked = bool(result.ok), int(result.checked)
        message = f"{result.message}; {note}" if result.ok else str(result.message)
    except checkpoints.CheckpointError as exc:
        ok, checked, message = False, 0, str(exc)
    except Exception as exc:  # noqa: BLE001 - a verifier crash is shown as "not verified", never as ok
        ok, checked, message = False, 0, f"verifier failed: {type(exc).__name__}"
    ChainCheck.objects.create(run_by=request.user, ok=ok, records_checked=checked, message=message,
                              seconds=time.monotonic() - started)
    return back


def _back_to_view(request: HttpRequest) -> HttpResponse:
    """To the audit list with the filters and page the auditor had (only known filter names kept)."""
    query = kept_query(request.POST.get("view", ""))
    return redirect(reverse("web:audit") + (f"?{query}" if query else ""))
