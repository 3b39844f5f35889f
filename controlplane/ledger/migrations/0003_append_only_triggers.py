"""UPDATE and DELETE on spend lines are refused by the database (SQLite and PostgreSQL)."""

from django.db import migrations

from controlplane.audit.triggers import migration_ops

forward, backward = migration_ops("ledger_spendline")


class Migration(migrations.Migration):
    dependencies = [("ledger", "0002_org_cap_unique_and_unit_index")]
    operations = [migrations.RunPython(forward, backward, elidable=False)]
