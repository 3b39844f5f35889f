"""Header conditions and a body-size limit on grants (controlplane/policy/conditions.py).

On SQLite, adding a column with a default rebuilds the table, and the rebuild drops the triggers that bump
the policy version on every grant change (fleet 0004); without them the decision API's grant cache would
serve revoked grants. They are created again here, right after the rebuild."""

from django.db import migrations, models

EVENTS = ("INSERT", "UPDATE", "DELETE")
BUMP = "UPDATE fleet_policyversion SET version = version + 1 WHERE id = 1"


def restore_policy_version_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return  # PostgreSQL adds the columns in place; its triggers stay
    for event in EVENTS:
        schema_editor.execute(
            f"CREATE TRIGGER IF NOT EXISTS roster_policy_version_policy_grant_{event.lower()} "
            f"AFTER {event} ON policy_grant BEGIN {BUMP}; END")


class Migration(migrations.Migration):

    dependencies = [
        ("policy", "0001_initial"),
        ("fleet", "0004_policy_version_triggers"),
    ]

    operations = [
        migrations.AddField(
            model_name="grant",
            name="header_conditions",
            field=models.JSONField(blank=True, default=list, help_text='e.g. [{"name": "content-type", "equals": "application/json"}, {"name": "x-http-method-override", "absent": true}]; empty: any headers'),
        ),
        migrations.AddField(
            model_name="grant",
            name="max_body_size",
            field=models.PositiveBigIntegerField(blank=True, help_text="bytes; empty: up to the gateway's body limit (allow and ask only)", null=True),
        ),
        migrations.RunPython(restore_policy_version_triggers, migrations.RunPython.noop, elidable=False),
    ]
