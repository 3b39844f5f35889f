"""The auditor's filter form (time, worker, run, kind, verdict, order), shared by the browse page and the CSV
export so the download is exactly the filtered view."""

from __future__ import annotations

from django import forms
from django.db.models import QuerySet
from django.http import QueryDict

from controlplane.audit.export import filtered_records
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import KINDS as AUDIT_KINDS
from controlplane.core.ids import MAX_DB_ID

KINDS = sorted(AUDIT_KINDS)
# The format <input type="datetime-local"> shows; Django's default (with a space) would show blank.
LOCAL_INPUT = "%Y-%m-%dT%H:%M"
VERDICTS = ["allow", "deny", "ask", "approved", "refused", "expired"]


def _choices(values: list[str]) -> list[tuple[str, str]]:
    return [("", "any")] + [(v, v) for v in values]


def _local_input() -> forms.DateTimeInput:
    return forms.DateTimeInput(format=LOCAL_INPUT, attrs={"type": "datetime-local"})


class AuditFilterForm(forms.Form):
    since = forms.DateTimeField(required=False, label="From (UTC)",
                                widget=_local_input())
    until = forms.DateTimeField(required=False, label="Until (UTC)",
                                widget=_local_input())
    worker = forms.CharField(required=False, max_length=64, label="Worker")
    run = forms.IntegerField(required=False, min_value=1, max_value=MAX_DB_ID, label="Run id")
    seq = forms.IntegerField(required=False, min_value=1, max_value=MAX_DB_ID, label="Record #")
    kind = forms.ChoiceField(required=False, label="Kind")
    verdict = forms.ChoiceField(required=False, label="Verdict")
    order = forms.ChoiceField(required=False, label="Order",
                              choices=[("newest", "newest first"), ("oldest", "oldest first")])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        known_kinds = set(AuditRecord.objects.values_list("kind", flat=True).distinct())
        known_verdicts = set(
            AuditRecord.objects.exclude(verdict="").values_list("verdict", flat=True).distinct())
        self.fields["kind"].choices = _choices(sorted(set(KINDS) | known_kinds))
        self.fields["verdict"].choices = _choices(sorted(set(VERDICTS) | known_verdicts))

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            # Not an empty result: "0 records" would read as "nothing happened then".
            self.add_error("until", forms.ValidationError(
                "“Until” is before “From”: no time is in that range. Swap them.", code="range"))
        return cleaned

    def newest_first(self) -> bool:
        return not (self.is_valid() and self.cleaned_data.get("order") == "oldest")

    def filtered(self) -> QuerySet[AuditRecord]:
        """Records matching the filters, in chain order. Bad input matches nothing (never widens)."""
        if not self.is_valid():
            return AuditRecord.objects.none()
        f = self.cleaned_data
        return filtered_records(since=f.get("since"), until=f.get("until"),
                                worker=(f.get("worker") or "").strip() or None, run=f.get("run"),
                                kind=f.get("kind") or None, verdict=f.get("verdict") or None,
                                seq=f.get("seq"))


FILTER_NAMES = frozenset(AuditFilterForm.base_fields) | {"page"}


def kept_query(raw: str) -> str:
    """The filters (and page) of a query string, re-encoded; anything else is dropped. Lets "verify"
    send the auditor back to the view they were on without becoming an open redirect."""
    query = QueryDict(raw[:2000], mutable=True)
    for name in list(query):
        if name not in FILTER_NAMES:
            del query[name]
    return query.urlencode()
