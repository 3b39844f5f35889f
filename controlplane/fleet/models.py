from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from controlplane.core.taint import DataClass

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{0,63}$", "1 to 64 characters of a-z, 0-9 and -")


class Worker(models.Model):
    name = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    description = models.TextField(blank=True)
    # What the worker *is*. Only a human admin may change it: the worker proposes direction and pace, never
    # capability, so there is no promotion path.
    identity = models.TextField(blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    class Origin(models.TextChoices):
        HUMAN = "human", "filed by a human"
        PROACTIVE = "proactive", "proactive"

    class Status(models.TextChoices):
        QUEUED = "queued"
        STARTING = "starting"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        REFUSED = "refused"
        TIMED_OUT = "timed_out"
        CANCELLED = "cancelled"

    LIVE_STATUSES = (Status.QUEUED, Status.STARTING, Status.RUNNING)

    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="runs")
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.HUMAN)
    filed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    command = models.JSONField(default=list, blank=True)
    # What the run was asked to do, in words (the reference agent's task, a channel's framing); written
    # into /config/input.json with the rest of the run's input (docs/architecture.md, the run's input).
    task = models.TextField(blank=True, default="")
    # Facts fixed once, when dispatch assembles the run's input (controlplane.dispatch.runinput), and never
    # changed after: whether the input carried conversation content (later stores mount read-only for such
    # a run), who was in the room ([{"id", "name", "role"}]: the speakers of the turns it was given and the
    # room's members where the adapter knows them), and the SHA-256 of the input.json the box was given.
    input_assembled = models.BooleanField(default=False)
    carries_conversation = models.BooleanField(default=False)
    participants = models.JSONField(default=list, blank=True)
    input_sha256 = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    status_reason = models.TextField(blank=True)
    # Only the SHA-256 of the single-use proxy token is kept; cleared when the run ends (revocation).
    token_hash = models.CharField(max_length=64, null=True, blank=True, unique=True)
    taint = models.PositiveSmallIntegerField(choices=DataClass.choices, default=DataClass.PRIVATE)
    untrusted = models.BooleanField(default=False)
    timeout_seconds = models.PositiveIntegerField(default=600)
    deadline = models.DateTimeField(null=True, blank=True)
    image_id = models.CharField(max_length=128, blank=True)
    container_id = models.CharField(max_length=128, blank=True)
    # The ROSTER_BOX_NAMESPACE of the box host whose dispatcher claimed the run: only that host's dockerd
    # has its box, so only that host's reaper may judge it (another host would see "container gone").
    box_host = models.CharField(max_length=64, blank=True, default="")
    # The box's address on the locked network, recorded as soon as its box starts: the run's token is
    # accepted only from there (controlplane.fleet.tokens.token_address_problem); null until then.
    box_address = models.GenericIPAddressField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    output = models.TextField(blank=True)
    # Where each part of `output` came from, in arrival order: [["stdout" | "stderr", characters], ...]
    # (controlplane.dispatch.boxoutput.output_pieces reads the two together); [] for a run stored before.
    output_sources = models.JSONField(default=list, blank=True)
    output_truncated = models.BooleanField(default=False)
    # The agent's final answer, taken on the trusted side from the output by the run's answer rule
    # (controlplane.dispatch.answers); "" when the rule found none. Content from the box: untrusted.
    answer = models.TextField(blank=True, default="")
    # A repair (docs/memory.md, "Repair"): the ended run whose task this one does again, with the same
    # input origin (its conversation is the original's: controlplane.conversations.selectors).
    requeue_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="requeues")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.worker_id}"

    @property
    def is_live(self) -> bool:
        return self.status in self.LIVE_STATUSES


class RunDecision(models.Model):
    """An allowed egress decision awaiting its outcome: the run and a snapshot of the matched grant's
    result_class / untrusted at decision time, so /outcome raises taint by the rule that allowed the
    request (not by a later edit), and /trace links the body. Written by the decision service."""

    decision_id = models.CharField(max_length=64, unique=True)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="decisions")
    grant_slug = models.CharField(max_length=64)
    # The name (never the value) of the secret the decision handed the gateway, so an outcome reporting
    # echoes of it scrubbed from the response can name it in a tripwire, whatever the grant says later.
    secret_name = models.CharField(max_length=64, blank=True, default="")
    result_class = models.PositiveSmallIntegerField(choices=DataClass.choices)
    untrusted = models.BooleanField()
    trace = models.BooleanField(default=False)
    method = models.CharField(max_length=16)
    url = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    outcome_at = models.DateTimeField(null=True, blank=True)
    outcome_status = models.IntegerField(null=True, blank=True)
    # SHA-256 of the response body as the upstream sent it, from the outcome (empty: none reported, an
    # older gateway's outcome or no response); the answer sheet shows it beside the URL (docs/audit.md).
    response_sha256 = models.CharField(max_length=64, blank=True, default="")
    traced = models.BooleanField(default=False)


class PolicyVersion(models.Model):
    """One row whose counter database triggers bump on every insert, update or delete of a grant or a
    secret, by any path (admin, files, queryset.update, raw SQL). The decision service caches compiled
    grants per version, so an edit is seen by the very next decision in every process."""

    version = models.BigIntegerField(default=0)
