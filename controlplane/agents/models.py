"""Presets (what runs in a box, as data), each worker's choice of one, and what a run was started with.
Rows change only through controlplane.agents.services (validated, audited); dispatch reads them through
controlplane.agents.selectors and applies them without knowing which agent it is."""

from __future__ import annotations

from django.db import models

from controlplane.fleet.models import Run, Worker, slug_validator


class Preset(models.Model):
    class Kind(models.TextChoices):
        BUILTIN = "builtin", "built in (workers/presets/<slug>/preset.toml, read-only here)"
        CUSTOM = "custom", "custom (an admin's)"

    class Wire(models.TextChoices):
        OPENAI_CHAT = "openai-chat", "OpenAI chat completions"
        OPENAI_RESPONSES = "openai-responses", "OpenAI Responses"
        ANTHROPIC_MESSAGES = "anthropic-messages", "Anthropic messages"
        GEMINI = "gemini", "Gemini generateContent"

    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CUSTOM)
    title = models.CharField(max_length=200)
    image = models.CharField(max_length=255, blank=True,
                             help_text='"" = the base box image; {box_tag} allowed')
    build = models.CharField(max_length=500, blank=True,
                             help_text="how to build the image when it is missing")
    wire = models.CharField(max_length=32, choices=Wire.choices)
    command = models.JSONField(default=list, help_text='argv, e.g. ["pi", "-p", "{prompt}"]')
    stdin = models.CharField(max_length=16, default="none", help_text="none | prompt")
    answer = models.CharField(max_length=200, default="stdout", help_text="the answer rule (docs/presets.md)")
    key_variable = models.CharField(max_length=128)
    default_model = models.CharField(max_length=200, blank=True, help_text="empty: ROSTER_AGENT_MODEL")
    default_base_url = models.CharField(max_length=500, blank=True, help_text="empty: ROSTER_AGENT_BASE_URL")
    env = models.JSONField(default=dict, blank=True)
    files = models.JSONField(default=list, blank=True)
    suggested_grant = models.JSONField(null=True, blank=True)
    npm_packages = models.JSONField(default=list, blank=True)
    pypi_packages = models.JSONField(default=list, blank=True)
    # A built-in's file (repository-relative) and the SHA-256 of its bytes when it was last loaded.
    source = models.CharField(max_length=500, blank=True)
    source_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class WorkerAgent(models.Model):
    """A worker's agent: its preset and model, and the admin-only image and environment of its boxes.
    A worker without one runs the `reference` preset with the control plane's model settings."""

    worker = models.OneToOneField(Worker, on_delete=models.CASCADE, related_name="agent")
    preset = models.ForeignKey(Preset, on_delete=models.PROTECT, related_name="workers")
    model = models.CharField(max_length=200, blank=True, help_text="empty: the preset's default model")
    base_url = models.CharField(max_length=500, blank=True,
                                help_text="the model API's base URL; empty: the preset's default")
    image = models.CharField(max_length=255, blank=True,
                             help_text="this worker's box image; empty: the preset's (or the base box image)")
    environment = models.JSONField(default=dict, blank=True,
                                   help_text='extra variables for this worker\'s boxes, e.g. {"TZ": "UTC"}; '
                                             "never a secret, never a variable Roster sets")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"agent of {self.worker_id}"


class RunAgent(models.Model):
    """The preset a run was started with, as it was then (a later edit of the preset does not change a
    queued run), and the model and base URL it was told to use."""

    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="agent")
    preset_slug = models.CharField(max_length=64)
    preset = models.JSONField(help_text="the preset's file form at start")
    model = models.CharField(max_length=200)
    base_url = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)
