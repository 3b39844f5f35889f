from django.db import models

from controlplane.core.taint import DataClass
from controlplane.fleet.models import Worker, slug_validator
from controlplane.vault.models import Secret


class Grant(models.Model):
    """One egress rule. Matching semantics and precedence live in controlplane.policy.matching;
    field validation in controlplane.policy.validation (shared by admin, TOML files and API)."""

    class Mode(models.TextChoices):
        AUTO = "auto"
        ASK = "ask"
        DENY = "deny"

    class Wire(models.TextChoices):
        """The model API a grant's host speaks: a refusal toward that host is shaped as its provider's
        error (docs/wire.md), and presets name theirs (docs/presets.md)."""

        NONE = "", "not a model API"
        OPENAI_CHAT = "openai-chat", "OpenAI chat completions"
        OPENAI_RESPONSES = "openai-responses", "OpenAI Responses"
        ANTHROPIC_MESSAGES = "anthropic-messages", "Anthropic messages"
        GEMINI = "gemini", "Gemini generateContent"

    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator], help_text="id = file stem")  # noqa: E501
    description = models.TextField(blank=True)
    worker = models.ForeignKey(
        Worker, null=True, blank=True, on_delete=models.CASCADE, related_name="grants",
        help_text="empty: applies to every worker",
    )
    methods = models.JSONField(default=list, blank=True, help_text='e.g. ["GET", "POST"]; empty: any')
    schemes = models.JSONField(default=list, blank=True, help_text='["https"] or ["http", "https"]')
    host = models.CharField(max_length=255, help_text="exact host or *.example.com; lowercase, no dot at end")
    port = models.PositiveIntegerField(null=True, blank=True, help_text="empty: the scheme's default port")
    paths = models.JSONField(default=list, blank=True, help_text='path patterns, e.g. ["/v1/*"]; empty: any')
    mcp_tools = models.JSONField(default=list, blank=True, help_text="MCP tool names; empty: any")
    header_conditions = models.JSONField(
        default=list, blank=True,
        help_text='e.g. [{"name": "content-type", "equals": "application/json"}, '
                  '{"name": "x-http-method-override", "absent": true}]; empty: any headers',
    )
    max_body_size = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="bytes; empty: up to the gateway's body limit (allow and ask only)"
    )
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.AUTO)
    max_taint = models.PositiveSmallIntegerField(choices=DataClass.choices, default=DataClass.PRIVATE)
    result_class = models.PositiveSmallIntegerField(choices=DataClass.choices, default=DataClass.PRIVATE)
    untrusted = models.BooleanField(default=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    secret = models.ForeignKey(Secret, null=True, blank=True, on_delete=models.PROTECT, related_name="grants")
    inject_header = models.CharField(max_length=128, blank=True, help_text="header that carries the secret")
    inject_format = models.CharField(
        max_length=255, blank=True, default="{secret}", help_text='e.g. "Bearer {secret}"'
    )
    cost_per_call = models.PositiveBigIntegerField(default=0, help_text="micro-currency units per call")
    tunnel = models.BooleanField(default=False, help_text="CONNECT host:port without interception")
    trace = models.BooleanField(default=False, help_text="store request bodies byte-exactly (model inputs)")
    journal = models.BooleanField(
        default=True, help_text="journal model calls: request and response bytes, credentials masked "
                                "(docs/journal.md); on by default, an admin turns it off (audited)")
    wire = models.CharField(max_length=32, blank=True, default="", choices=Wire.choices,
                            help_text="the model API this host speaks: refusals take its error shape")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug
