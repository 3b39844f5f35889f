from django.db import models


class AuditRecord(models.Model):
    """One link of the append-only hash chain. `body` holds the exact stored bytes (canonical JSON,
    including seq, time and prev); `hash` is SHA-256 over them. The other columns are copies of
    fields in `body` kept for filtering; the verifier checks they agree with it. Append-only,
    enforced by database triggers."""

    seq = models.BigIntegerField(unique=True)
    created_at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=32, db_index=True)
    run_id_ref = models.BigIntegerField(null=True, blank=True, db_index=True)
    worker_name = models.CharField(max_length=64, blank=True, db_index=True)
    verdict = models.CharField(max_length=16, blank=True, db_index=True)
    reason = models.CharField(max_length=32, blank=True)
    body = models.TextField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["seq"]
        permissions = [("export_auditrecord", "Can export audit records")]


class ModelTrace(models.Model):
    """Byte-exact copy of a request body sent under a grant marked `trace` (model inputs)."""

    run_id_ref = models.BigIntegerField(db_index=True)
    grant_slug = models.CharField(max_length=64)
    decision_id = models.CharField(max_length=64, db_index=True)
    method = models.CharField(max_length=16)
    url = models.TextField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    body = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
