"""The run journal's storage (docs/journal.md). Bodies are content-addressed: a body (or, for a chat or
messages request that parses, each message of it and the bytes between them) is stored once under its
SHA-256, so a conversation's history, repeated in every call, costs once. A model call's row names its
parts by hash and is append-only (database triggers, controlplane/audit/triggers.py); a body's bytes may
be erased (retention, a forgotten note's text) while its hash, and the row naming it, stay."""

from django.db import models


class JournalBody(models.Model):
    sha256 = models.CharField(max_length=64, unique=True)
    size = models.PositiveBigIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    # The newest call that named this body: retention counts from it (a shared history stays while used).
    last_used_at = models.DateTimeField(db_index=True)
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_reason = models.CharField(max_length=200, blank=True, default="")


class JournalCall(models.Model):
    """One journaled model call: the request as the upstream received it (credentials masked by the
    gateway) and the response as the upstream sent it."""

    decision_id = models.CharField(max_length=64, unique=True)
    run_id_ref = models.BigIntegerField(db_index=True)
    grant_slug = models.CharField(max_length=64)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    method = models.CharField(max_length=16)
    url = models.TextField()
    request_headers = models.JSONField(default=list)
    request_sha256 = models.CharField(max_length=64)
    request_parts = models.JSONField(default=list)  # hashes of the bodies whose bytes, joined, are it
    request_size = models.PositiveBigIntegerField()
    request_truncated = models.BooleanField(default=False)
    request_masked = models.PositiveIntegerField(default=0)
    status = models.IntegerField(null=True, blank=True)  # null: no response (the upstream failed)
    response_headers = models.JSONField(default=list)
    response_sha256 = models.CharField(max_length=64, blank=True, default="")
    response_size = models.PositiveBigIntegerField(default=0)
    response_truncated = models.BooleanField(default=False)
    response_masked = models.PositiveIntegerField(default=0)
    response_streamed = models.BooleanField(default=False)
    withheld = models.CharField(max_length=200, blank=True, default="")
    error = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["started_at", "id"]
        indexes = [models.Index(fields=["run_id_ref", "started_at"])]
