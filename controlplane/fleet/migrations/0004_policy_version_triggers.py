"""Triggers that bump fleet_policyversion on every change to policy_grant or vault_secret (SQLite and
PostgreSQL), and the single counter row they bump."""

from django.db import migrations

TABLES = ("policy_grant", "vault_secret")
EVENTS = ("INSERT", "UPDATE", "DELETE")
BUMP = "UPDATE fleet_policyversion SET version = version + 1 WHERE id = 1"


def _name(table: str, event: str) -> str:
    return f"roster_policy_version_{table}_{event.lower()}"


def forward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    schema_editor.execute("INSERT INTO fleet_policyversion (id, version) VALUES (1, 0)")
    if vendor == "postgresql":
        schema_editor.execute(
            "CREATE OR REPLACE FUNCTION roster_bump_policy_version() RETURNS trigger AS $$ "
            f"BEGIN {BUMP}; RETURN NULL; END; $$ LANGUAGE plpgsql"
        )
    elif vendor != "sqlite":
        raise RuntimeError(f"policy version triggers not implemented for {vendor}")
    for table in TABLES:
        for event in EVENTS:
            if vendor == "sqlite":
                schema_editor.execute(
                    f"CREATE TRIGGER {_name(table, event)} AFTER {event} ON {table} BEGIN {BUMP}; END")
            else:
                schema_editor.execute(
                    f"CREATE TRIGGER {_name(table, event)} AFTER {event} ON {table} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION roster_bump_policy_version()")


def backward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for table in TABLES:
        for event in EVENTS:
            suffix = "" if vendor == "sqlite" else f" ON {table}"
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {_name(table, event)}{suffix}")
    if vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS roster_bump_policy_version()")
    schema_editor.execute("DELETE FROM fleet_policyversion")


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0003_policy_version"),
        ("policy", "0001_initial"),
        ("vault", "0001_initial"),
    ]
    operations = [migrations.RunPython(forward, backward, elidable=False)]
