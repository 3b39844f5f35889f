"""What the trusted side keeps about the world store besides the repository itself: each run's checkout
(the commit it was given and whether it could write), and each commit Roster made with the run and
proposal it came from, so a run's commits can be found and reverted (P4: records reverted) without
parsing the repository's history."""

from __future__ import annotations

from django.db import models

from controlplane.fleet.models import Run, Worker


class Checkout(models.Model):
    """A run's plain checkout at /knowledge: read-only when the run carried conversation content."""

    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="knowledge_checkout")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="knowledge_checkouts")
    base_commit = models.CharField(max_length=40)
    writable = models.BooleanField()
    created_at = models.DateTimeField(auto_now_add=True)
    collected_at = models.DateTimeField(null=True, blank=True)
    # What collection found: "no change", "proposed", or why the change was refused.
    outcome = models.CharField(max_length=500, blank=True)
    proposal_id = models.UUIDField(null=True, blank=True, help_text="the knowledge_change proposal made")

    def __str__(self) -> str:
        return f"checkout of run {self.run_id} at {self.base_commit[:12]}"


class Commit(models.Model):
    class Kind(models.TextChoices):
        CHANGE = "change", "a run's change"
        REVERT = "revert", "a revert of a run's commits"

    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="knowledge_commits")
    sha = models.CharField(max_length=40, unique=True)
    parent = models.CharField(max_length=40)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # The run whose change this is (kind change), or the run whose commits it reverts (kind revert).
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="knowledge_commits")
    proposal_id = models.UUIDField(null=True, blank=True)
    paths = models.JSONField(default=list)
    by = models.CharField(max_length=150, blank=True, help_text="who asked for a revert")
    reverted_by = models.CharField(max_length=40, blank=True, help_text="the commit that reverted this one")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.sha[:12]} (run {self.run_id})"
