from django.db import models

from controlplane.fleet.models import slug_validator


class Secret(models.Model):
    class Kind(models.TextChoices):
        GENERIC = "generic"
        OPENAI = "openai", "OpenAI-style API key"
        ANTHROPIC = "anthropic", "Anthropic-style API key"
        GEMINI = "gemini", "Gemini (Google AI) API key"
        GITHUB = "github", "GitHub token"
        SLACK = "slack", "Slack bot token"
        AWS = "aws", "AWS access key id"

    name = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.GENERIC)
    # Fernet ciphertext; the key lives in settings.ROSTER_VAULT_KEY_FILE, never in the database.
    ciphertext = models.BinaryField(editable=False)
    # What a box carries instead of the value: structurally valid for the kind, random, unique.
    sentinel = models.CharField(max_length=128, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
