"""Destinations (where a consequential action may go, with its real credential), proposals (what a box
asks to be done there, held for a human) and earned-trust rules (an admin's standing approval). The box
names a destination; it never sees its URL's credentials or any secret."""

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run, Worker
from controlplane.vault.models import Secret

DESTINATION_NAME_MAX = 48  # "destination:<name>" must fit the ledger's 64-character grant_slug column


class Destination(models.Model):
    """Field validation lives in controlplane.proposals.validation (shared by admin, TOML files, CLI)."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        SMTP = "smtp", "mail relay (SMTP)"
        GIT = "git", "Git remote"

    name = models.CharField(max_length=DESTINATION_NAME_MAX, unique=True, help_text="id = file stem")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    secret = models.ForeignKey(
        Secret,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="destinations",
        help_text="webhook: sent in secret_header; smtp: login password; git: HTTPS password or token",
    )
    # A run whose taint is above this ceiling cannot propose here (refused at proposal time).
    max_taint = models.PositiveSmallIntegerField(choices=DataClass.choices, default=DataClass.PRIVATE)
    cost_micro = models.PositiveBigIntegerField(default=0, help_text="micro-currency units per proposal")
    daily_limit = models.PositiveIntegerField(
        default=0, help_text="proposals per worker per UTC day; 0: none"
    )
    # webhook: url, method, headers, secret_header/secret_format; git: url is the remote
    url = models.CharField(max_length=2048, blank=True)
    method = models.CharField(max_length=8, blank=True)
    headers = models.JSONField(default=dict, blank=True)
    secret_header = models.CharField(max_length=128, blank=True)
    secret_format = models.CharField(max_length=255, blank=True)
    # smtp
    smtp_host = models.CharField(max_length=255, blank=True)
    smtp_port = models.PositiveIntegerField(null=True, blank=True)
    starttls = models.BooleanField(default=True)
    login = models.CharField(max_length=255, blank=True)
    from_address = models.CharField(max_length=320, blank=True)
    allowed_recipients = models.JSONField(
        default=list, blank=True, help_text='addresses or "@domain" entries; empty: nobody'
    )
    # git
    branch_pattern = models.CharField(max_length=255, blank=True, help_text="e.g. roster/*")
    protected_branches = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def ledger_slug(self) -> str:
        return f"destination:{self.name}"


class Proposal(models.Model):
    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        EMAIL = "email"
        GIT_PUSH = "git_push"
        IDENTITY_EDIT = "identity_edit"
        # Work the worker proposes (direction and pace, invariant 6): once allowed, a proactive run on its
        # queue, budget-gated like any proactive run (invariant 8). The executor is dispatch's.
        FOLLOW_UP = "follow_up", "follow-up task"
        # A note for the worker's memory (P3), written by memory's executor with the run's provenance.
        MEMORY_NOTE = "memory_note", "memory note"
        # The change a run made to its knowledge checkout, committed by knowledge's executor
        # (docs/knowledge.md).
        KNOWLEDGE_CHANGE = "knowledge_change", "knowledge change"

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REFUSED = "refused"
        EXPIRED = "expired"
        EXECUTING = "executing"
        EXECUTED = "executed"
        FAILED = "failed"

    class Channel(models.TextChoices):
        WEB = "web"
        CLI = "cli"
        RULE = "rule", "earned-trust rule"
        CHAT = "chat", "chat (a reply or reaction on the approval post)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="proposals")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="proposals")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    destination = models.ForeignKey(
        Destination, null=True, blank=True, on_delete=models.PROTECT, related_name="proposals"
    )
    payload = models.JSONField(help_text="validated content, exactly what will be performed")
    payload_sha256 = models.CharField(max_length=64)
    # The worker's own words for why: untrusted, shown to approvers as quoted text, never acted on.
    rationale = models.TextField(blank=True)
    # Provenance: who was in the room when the run proposed this (snapshots at proposal time): the run's
    # participants (fixed when its input was assembled) and what it had received.
    participants = models.JSONField(default=list, blank=True)
    taint = models.PositiveSmallIntegerField(choices=DataClass.choices)
    untrusted = models.BooleanField()
    seen = models.JSONField(default=list, blank=True, help_text="what the run had received, newest first")
    # What a tripwire found (controlplane.proposals.holds: the participant scan); non-empty: a person decides.
    held = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    decided_at = models.DateTimeField(null=True, blank=True)
    channel = models.CharField(max_length=8, choices=Channel.choices, blank=True)
    reason = models.TextField(blank=True)
    trust_rule = models.ForeignKey(
        "TrustRule", null=True, blank=True, on_delete=models.SET_NULL, related_name="proposals"
    )
    # Sent to the remote (Idempotency-Key header, Message-ID) so no retry performs the action twice.
    idempotency_key = models.CharField(max_length=64, unique=True)
    attempts = models.PositiveIntegerField(default=0)
    executed_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True, help_text="the remote's answer (never a credential)")

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.kind} proposal {self.pk}"


# Kinds applied on the trusted side itself, with no destination (their executors are other apps').
NO_DESTINATION_KINDS = ("follow_up", "memory_note", "knowledge_change")


class TrustRule(models.Model):
    """Trust explicitly earned: proposals of one worker to one destination (optionally one kind) are
    approved without a human, at most `max_per_day` a day, until `expires_at`. Never identity edits:
    they have no destination, and both this model and the approval path refuse the kind."""

    name = models.CharField(max_length=64, unique=True)
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="trust_rules")
    # Empty only for a follow-up rule (follow-ups have no destination).
    destination = models.ForeignKey(Destination, null=True, blank=True, on_delete=models.CASCADE,
                                    related_name="trust_rules")
    kind = models.CharField(
        max_length=16,
        blank=True,
        choices=Proposal.Kind.choices,
        help_text="empty: the destination's own kind",
    )
    max_per_day = models.PositiveIntegerField(
        default=0, help_text="auto-approvals per UTC day; 0: none (the rule approves nothing)"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(kind="identity_edit"), name="trust_rule_never_identity_edit"
            ),
            models.CheckConstraint(
                condition=models.Q(destination__isnull=False) | models.Q(kind__in=NO_DESTINATION_KINDS),
                name="trust_rule_destination_unless_follow_up",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        if self.kind == Proposal.Kind.IDENTITY_EDIT:
            raise ValidationError({"kind": "identity edits always need a human; no rule can approve them"})
        if self.destination_id is None and self.kind not in NO_DESTINATION_KINDS:
            raise ValidationError(
                {"destination": "a rule names a destination (only follow-up and memory-note rules have "
                                "none)"})
        if self.kind in NO_DESTINATION_KINDS and self.destination_id is not None:
            raise ValidationError({"destination": f"{self.get_kind_display()} proposals have no destination"})
