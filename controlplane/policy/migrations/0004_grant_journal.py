"""A grant's run-journal switch (docs/journal.md): on by default, so every model grant journals its calls
until an admin turns it off. On SQLite the column's default rebuilds the table, dropping the policy-version
triggers (fleet 0004): they are created again right after, as in 0003."""

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
    dependencies = [("policy", "0003_grant_wire")]

    operations = [
        migrations.AddField(
            model_name="grant",
            name="journal",
            field=models.BooleanField(
                default=True, help_text="journal model calls: request and response bytes, credentials masked "
                                        "(docs/journal.md); on by default, an admin turns it off (audited)"),
        ),
        migrations.RunPython(restore_policy_version_triggers, migrations.RunPython.noop, elidable=False),
    ]
