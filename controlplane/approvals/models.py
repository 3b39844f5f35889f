import uuid

from django.conf import settings
from django.db import models

from controlplane.fleet.models import Run


class Approval(models.Model):
    """A held request waiting for a human. It covers exactly the request it showed (request_digest =
    SHA-256 over method, URL and body hash) and is used once."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REFUSED = "refused"
        EXPIRED = "expired"
        USED = "used"

    class Channel(models.TextChoices):
        WEB = "web"
        CLI = "cli"
        API = "api"
        CHAT = "chat", "chat (a reply or reaction on the approval post)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="approvals")
    # By name, not by import: approvals and policy are independent apps (pyproject's layers contract).
    grant = models.ForeignKey("policy.Grant", null=True, on_delete=models.SET_NULL, related_name="approvals")
    grant_slug = models.CharField(max_length=64)
    request = models.JSONField(help_text="snapshot: method, url, masked headers, body preview, body sha256")
    request_digest = models.CharField(max_length=64, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    decided_at = models.DateTimeField(null=True, blank=True)
    channel = models.CharField(max_length=8, choices=Channel.choices, blank=True)
    # The approver's words with the decision: audited, and for a deny returned to the box in its 403.
    comment = models.TextField(blank=True, default="")
    # An approval that arrives after the hold window lets the next identical request pass once until then.
    grace_until = models.DateTimeField(null=True, blank=True)
    # Set when the gateway stopped holding the request; only then does a later approval open a grace pass.
    abandoned_at = models.DateTimeField(null=True, blank=True)
    used_at = models.DateTimeField(null=True, blank=True)
    # A time-boxed approval (docs/web.md, approvals): the approver also allowed identical requests (same
    # worker, same grant, same request_digest) until then. Only an approver's decision sets it, never a
    # grant edit and nothing a box can send; revoking it ends the window early.
    window_until = models.DateTimeField(null=True, blank=True)
    window_revoked_at = models.DateTimeField(null=True, blank=True)
    window_revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                          on_delete=models.PROTECT, related_name="+")
    # Why it was closed without a decision, when not by its expiry: its run ended (issue 27.4).
    closed_why = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["created_at"]
        permissions = [("decide_approval", "Can approve or refuse held requests")]
