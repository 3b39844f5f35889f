import re

from django.core.exceptions import ValidationError
from django.db import models

from controlplane.fleet.models import Run, Worker


class Unit(models.TextChoices):
    REQUESTS = "requests"
    BYTES = "bytes"
    MICRO = "micro", "micro-currency"
    TOKENS = "tokens", "model tokens"


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


# What a model name a request names is made of (`gpt-4o-mini`, `claude-3-5-sonnet@20240620`,
# `meta-llama/Llama-3.1-8B`, `qwen2.5:7b`), plus the glob's `*`, `?` and `[...]`.
_PATTERN_CHARS = re.compile(r"[A-Za-z0-9._:/@+\-*?\[\]!]+")


def price_pattern_problem(pattern: str) -> str:
    """Why `pattern` cannot be a price's model pattern, or "": a pattern no model name can match (a space,
    an unclosed `[`) would silently price nothing, and the calls it was meant for at no price."""
    if not pattern.strip():
        return "a pattern is a model name or a glob on one (gpt-4o*)"
    if not _PATTERN_CHARS.fullmatch(pattern):
        bad = sorted({c for c in pattern if not _PATTERN_CHARS.fullmatch(c)})
        shown = ", ".join("a space" if c == " " else repr(c) for c in bad)
        return f"{pattern!r} has {shown}: model names have letters, digits and . _ : / @ + - only"
    depth = 0
    for i, char in enumerate(pattern):
        if char == "[":
            if depth:
                return f"{pattern!r}: a '[' inside a '[...]' set"
            depth, start = 1, i
        elif char == "]" and depth:
            if i == start + 1 or (i == start + 2 and pattern[start + 1] == "!"):
                return f"{pattern!r}: an empty '[]' set matches nothing"
            depth = 0
    if depth:
        return f"{pattern!r}: the '[' at position {start + 1} is never closed"
    return ""


class ModelPrice(models.Model):
    """Admin-only configuration: what a model's tokens cost, in micro-currency per million tokens, and the
    output ceiling reserved when a call names no max_tokens. `pattern` is a shell-style glob on the model
    name the request names (`gpt-4o*`); an exact name wins, then the longest matching pattern."""

    pattern = models.CharField(max_length=200, unique=True)
    input_micro_per_million = models.PositiveBigIntegerField()
    cached_input_micro_per_million = models.PositiveBigIntegerField()
    output_micro_per_million = models.PositiveBigIntegerField()
    cache_write_micro_per_million = models.PositiveBigIntegerField(
        null=True, blank=True, verbose_name="cache write micro per million",
        help_text="input written to the provider's prompt cache (Anthropic bills its 5-minute cache at 1.25 "
                  "times the input price); blank, with the 1-hour price blank too: the input price")
    cache_write_1h_micro_per_million = models.PositiveBigIntegerField(
        null=True, blank=True, verbose_name="1-hour cache write micro per million",
        help_text="input written to a 1-hour prompt cache (Anthropic: 2 times the input price); set with the "
                  "cache write price, or leave both blank")
    max_output_tokens = models.PositiveBigIntegerField(
        help_text="the model's output ceiling: reserved when a call does not name max_tokens")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return (f"{self.pattern}: in {self.input_micro_per_million}"
                f" / cached {self.cached_input_micro_per_million} / out {self.output_micro_per_million}"
                " micro per million tokens")

    def clean(self) -> None:
        problem = price_pattern_problem(self.pattern or "")
        if problem:
            raise ValidationError({"pattern": problem})
        # One cache-write price alone would price the other kind of write at it: a 1-hour write at the
        # 5-minute rate is billed 60 % higher than it would be recorded.
        if (self.cache_write_micro_per_million is None) != (self.cache_write_1h_micro_per_million is None):
            raise ValidationError("set both cache-write prices (the 5-minute and the 1-hour one), or "
                                  "neither: then cache writes are priced as input")



class ModelCallReservation(models.Model):
    """What a model call reserved and at which prices (a snapshot: a price edited while the call runs
    does not change what it settles at). Written once by the reserve; the settle reads it."""

    decision_id = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=200)
    price_pattern = models.CharField(max_length=200, blank=True)
    input_micro_per_million = models.PositiveBigIntegerField(default=0)
    cached_input_micro_per_million = models.PositiveBigIntegerField(default=0)
    output_micro_per_million = models.PositiveBigIntegerField(default=0)
    # The rates in force when reserved. Null: a reservation from before cache writes were priced apart,
    # which settles them at its input rate.
    cache_write_micro_per_million = models.PositiveBigIntegerField(null=True)
    cache_write_1h_micro_per_million = models.PositiveBigIntegerField(null=True)
    input_estimate = models.PositiveBigIntegerField()
    max_output = models.PositiveBigIntegerField()
    tokens = models.PositiveBigIntegerField()
    micro = models.PositiveBigIntegerField()
    created_at = models.DateTimeField()
