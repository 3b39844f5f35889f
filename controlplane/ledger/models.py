from django.db import models

from controlplane.fleet.models import Run, Worker


class Unit(models.TextChoices):
    REQUESTS = "requests"
    BYTES = "bytes"
    MICRO = "micro", "micro-currency"


class Window(models.TextChoices):
    DAY = "day"
    MONTH = "month"
    ALL = "all", "all time"


class Cap(models.Model):
    """Admin-only configuration: a limit per worker (or org-wide when worker is empty)."""

    worker = models.ForeignKey(Worker, null=True, blank=True, on_delete=models.CASCADE, related_name="caps")
    unit = models.CharField(max_length=16, choices=Unit.choices)
    window = models.CharField(max_length=8, choices=Window.choices, default=Window.DAY)
    limit = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["worker", "unit", "window"],
                                    name="one_cap_per_scope_unit_window"),
            # NULL never equals NULL in a unique index, so org caps need their own constraint.
            models.UniqueConstraint(fields=["unit", "window"], condition=models.Q(worker__isnull=True),
                                    name="one_org_cap_per_unit_window"),
        ]

    def __str__(self) -> str:
        scope = self.worker.name if self.worker_id else "org"
        return f"{scope}: {self.limit} {self.unit} per {self.window}"


class SpendLine(models.Model):
    """Append-only (database triggers refuse UPDATE and DELETE). Totals are sums of these lines."""

    class Kind(models.TextChoices):
        RESERVE = "reserve"
        SETTLE = "settle"
        RELEASE = "release"

    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="spend_lines")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="spend_lines")
    grant_slug = models.CharField(max_length=64, blank=True)
    decision_id = models.CharField(max_length=64, blank=True, db_index=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    unit = models.CharField(max_length=16, choices=Unit.choices)
    amount = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [
            models.Index(fields=["worker", "unit", "created_at"]),
            models.Index(fields=["unit", "created_at"], name="ledger_spend_unit_time_idx"),
        ]
