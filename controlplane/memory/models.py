"""The worker's notes (P3: facts about people have one home, memory, scoped at recall and governed by the
subject). A note is written only by the trusted side, from an allowed `memory_note` proposal, and names the
run that wrote it, who was in the room and whether that run was untrusted (P4, invariant 1). Forgetting
erases the text and keeps the hash: the audit says a note existed, never what it said."""

from __future__ import annotations

from django.db import models

from controlplane.fleet.models import Run, Worker


class Note(models.Model):
    class Scope(models.TextChoices):
        PERSON = "person", "a person on a channel"
        CHANNEL = "channel", "a channel"
        WORKER = "worker", "the worker"

    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="notes")
    scope = models.CharField(max_length=8, choices=Scope.choices)
    # The channel's name (controlplane.conversations.Channel.name) for person and channel notes.
    channel = models.CharField(max_length=64, blank=True, db_index=True)
    # The person's chat id (e.g. @ana:example.org) for person notes.
    person = models.CharField(max_length=255, blank=True, db_index=True)
    text = models.TextField(blank=True)
    text_sha256 = models.CharField(max_length=64)
    written_by_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT,
                                       related_name="notes_written")
    proposal_id = models.UUIDField(null=True, blank=True, help_text="the memory_note proposal applied")
    participants = models.JSONField(default=list, blank=True, help_text="who was in the writing run's room")
    untrusted = models.BooleanField(help_text="the writing run had received untrusted content")
    created_at = models.DateTimeField(auto_now_add=True)
    corrected_at = models.DateTimeField(null=True, blank=True)
    corrected_by = models.CharField(max_length=150, blank=True)
    forgotten_at = models.DateTimeField(null=True, blank=True, db_index=True)
    forgotten_by = models.CharField(max_length=150, blank=True)
    forgotten_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                name="note_scope_fields",
                condition=(models.Q(scope="person") & ~models.Q(channel="") & ~models.Q(person=""))
                | (models.Q(scope="channel") & ~models.Q(channel="") & models.Q(person=""))
                | (models.Q(scope="worker") & models.Q(channel="") & models.Q(person="")),
            ),
        ]

    def __str__(self) -> str:
        return f"note {self.pk} ({self.scope_label})"

    @property
    def scope_label(self) -> str:
        if self.scope == self.Scope.PERSON:
            return f"{self.person} on {self.channel}"
        if self.scope == self.Scope.CHANNEL:
            return f"channel {self.channel}"
        return f"worker {self.worker.name}"

    @property
    def provenance(self) -> str:
        by = f"run {self.written_by_run_id}" if self.written_by_run_id else "an admin"
        return f"written by {by}, {'untrusted' if self.untrusted else 'trusted'}"
