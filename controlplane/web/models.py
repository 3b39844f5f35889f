from django.conf import settings
from django.db import models


class ChainCheck(models.Model):
    """One run of the audit-chain verifier from the auditor page: who ran it, when, and what it found.
    Kept so the page can show the chain's last known status without re-hashing on every view."""

    started_at = models.DateTimeField(auto_now_add=True)
    run_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    ok = models.BooleanField()
    records_checked = models.PositiveBigIntegerField(default=0)
    message = models.TextField(blank=True)
    seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-started_at", "-id"]
