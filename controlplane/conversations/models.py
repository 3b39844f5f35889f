"""Channels (a room on a chat server, or a signed webhook) bound to exactly one worker (P1: two contexts
that must not mix are two workers), the messages they relay, the replies delivered back, the people's chat
ids linked to Roster users, and approval posts. A message is content for the worker, never a command to
Roster, whoever sends it (invariant 7); the one explicit exception is a reply or reaction on an approval
post by an allowlisted approver, handled by controlplane.conversations.chat_approvals."""

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from controlplane.fleet.models import Run, Worker, slug_validator
from controlplane.vault.models import Secret

matrix_id_validator = RegexValidator(
    r"^@[^:\s]{1,255}:[^\s]{1,255}$", "a Matrix user id, e.g. @ana:example.org"
)


class ChatServer(models.Model):
    """A Matrix homeserver and the bot account the relay uses there; its access token lives in the vault."""

    name = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    homeserver_url = models.URLField(max_length=512, help_text="e.g. https://matrix.example.org")
    bot_user_id = models.CharField(max_length=255, validators=[matrix_id_validator])
    access_token = models.ForeignKey(
        Secret,
        on_delete=models.PROTECT,
        related_name="chat_servers",
        help_text="the bot's access token (vault); never shown, never in a box",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Channel(models.Model):
    class Kind(models.TextChoices):
        MATRIX = "matrix", "Matrix room"
        SLACK = "slack", "Slack (signed Events API webhook)"
        MATTERMOST = "mattermost", "Mattermost (outgoing webhook token)"

    class Purpose(models.TextChoices):
        CONVERSATION = "conversation", "a conversation with its worker"
        APPROVALS = "approvals", "approvers' room (approval posts)"

    name = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    kind = models.CharField(max_length=16, choices=Kind.choices)
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.CONVERSATION)
    # A conversation channel serves exactly this worker; an approvers' room serves this worker's approvals,
    # or every worker's when empty.
    worker = models.ForeignKey(
        Worker, null=True, blank=True, on_delete=models.PROTECT, related_name="channels"
    )
    enabled = models.BooleanField(default=True)
    # Matrix
    server = models.ForeignKey(
        ChatServer, null=True, blank=True, on_delete=models.PROTECT, related_name="channels"
    )
    room_id = models.CharField(max_length=255, blank=True, help_text="e.g. !abc123:example.org")
    # Webhooks: the signing secret (Slack) or outgoing-webhook token (Mattermost), and the incoming-webhook
    # URL replies are posted to (it is itself a credential, so it lives in the vault too).
    signing_secret = models.ForeignKey(
        Secret, null=True, blank=True, on_delete=models.PROTECT, related_name="signing_channels"
    )
    reply_url = models.ForeignKey(
        Secret, null=True, blank=True, on_delete=models.PROTECT, related_name="reply_channels"
    )
    # Chat ids the admin names as the channel's owners (a label for the worker, never a power).
    owners = models.JSONField(default=list, blank=True)
    # A reply longer than this is split into parts (0: the kind's default, ROSTER_CHANNEL_*_MAX_CHARS).
    max_message_chars = models.PositiveIntegerField(default=0)
    # The room's members as the adapter last saw them (Matrix joined members): who was in the room.
    members = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["server", "room_id"], condition=~models.Q(room_id=""), name="one_channel_per_room"
            ),
            models.CheckConstraint(
                condition=~models.Q(purpose="conversation", worker__isnull=True),
                name="conversation_channel_has_a_worker",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ChatIdentity(models.Model):
    """A person's chat id linked to a Roster user: what makes their role `approver` (when the user is in
    the Approvers group) and what allowlists them on approval posts."""

    kind = models.CharField(max_length=16, choices=Channel.Kind.choices)
    chat_id = models.CharField(
        max_length=255, help_text="Matrix: @ana:example.org; Slack/Mattermost: user id"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_identities"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "chat_id"]
        verbose_name_plural = "chat identities"
        constraints = [models.UniqueConstraint(fields=["kind", "chat_id"], name="one_user_per_chat_id")]

    def __str__(self) -> str:
        return f"{self.chat_id} ({self.kind}) -> {self.user}"


class Message(models.Model):
    class Direction(models.TextChoices):
        INBOUND = "in", "from the room"
        OUTBOUND = "out", "the worker's reply"

    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="messages")
    direction = models.CharField(max_length=3, choices=Direction.choices)
    # The chat server's id for it (Matrix event id, Slack event id, Mattermost post id): a message seen
    # twice (a replayed sync batch, a retried webhook) is stored once.
    external_id = models.CharField(max_length=255)
    speaker_id = models.CharField(max_length=255)
    speaker_name = models.CharField(max_length=255, blank=True)
    role = models.CharField(max_length=16)  # member | owner | approver | worker
    sent_at = models.DateTimeField()
    text = models.TextField()
    text_truncated = models.BooleanField(default=False)
    # Inbound: the run it was given to (it joins a queued run of its channel, or starts one). Outbound: the
    # run whose answer it carries.
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="messages")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["sent_at", "id"]
        constraints = [models.UniqueConstraint(fields=["channel", "external_id"], name="message_seen_once")]


class Delivery(models.Model):
    """The run's answer going back to the conversation it serves, through the relay (never box egress).
    Sent part by part; each part's transaction id is fixed, so a resend after a crash is deduplicated by
    the chat server, and a part recorded as sent is never sent again."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="delivery")
    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="deliveries")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING, db_index=True)
    parts = models.JSONField(default=list, help_text="the text of each part, in order")
    sent_ids = models.JSONField(default=list, blank=True, help_text="the chat server's id of each sent part")
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"


class ApprovalPost(models.Model):
    """A held request or a proposal posted to an approvers' room, as quoted data. Only a reply or a
    reaction on this post, by an allowlisted approver, decides it."""

    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="approval_posts")
    approval = models.ForeignKey(
        "approvals.Approval", null=True, blank=True, on_delete=models.PROTECT, related_name="chat_posts"
    )
    proposal = models.ForeignKey(
        "proposals.Proposal", null=True, blank=True, on_delete=models.PROTECT, related_name="chat_posts"
    )
    external_id = models.CharField(max_length=255, blank=True, db_index=True)
    # The subject's status the post shows; when the subject moves on (a decision anywhere, expiry), the
    # relay edits the post and records what it now shows.
    shown_status = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "approval"], name="one_post_per_approval"),
            models.UniqueConstraint(fields=["channel", "proposal"], name="one_post_per_proposal"),
            models.CheckConstraint(
                condition=models.Q(approval__isnull=True) ^ models.Q(proposal__isnull=True),
                name="post_is_about_one_thing",
            ),
        ]


class RelayCursor(models.Model):
    """Where an adapter resumes after a restart (a Matrix sync token), stored in the transaction that
    stores the messages before it: nothing is lost, and a batch replayed is stored once."""

    key = models.CharField(max_length=128, unique=True)
    position = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)
