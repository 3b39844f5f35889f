"""The model wire format a grant's host speaks (refusals take that provider's error shape, docs/wire.md).

On SQLite, adding a column with a default rebuilds the table, and the rebuild drops the triggers that bump
the policy version on every grant change (fleet 0004); they are created again right after (as in 0002)."""

from django.db import migrations, models

EVENTS = ("INSERT", "UPDATE", "DELETE")
BUMP = "UPDATE fleet_policyversion SET version = version + 1 WHERE id = 1"


def restore_policy_version_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return  # PostgreSQL adds the column in place; its triggers stay
    for event in EVENTS:
        schema_editor.execute(
            f"CREATE TRIGGER IF NOT EXISTS roster_policy_version_policy_grant_{event.lower()} "
            f"AFTER {event} ON policy_grant BEGIN {BUMP}; END")


class Migration(migrations.Migration):

    dependencies = [
        ("policy", "0002_grant_header_conditions"),
    ]

    operations = [
        migrations.AddField(
            model_name="grant",
            name="wire",
            field=models.CharField(blank=True, choices=[("", "not a model API"), ("openai-chat", "OpenAI chat completions"), ("openai-responses", "OpenAI Responses"), ("anthropic-messages", "Anthropic messages"), ("gemini", "Gemini generateContent")], default="", help_text="the model API this host speaks: refusals take its error shape", max_length=32),
        ),
        migrations.RunPython(restore_policy_version_triggers, migrations.RunPython.noop, elidable=False),
    ]
