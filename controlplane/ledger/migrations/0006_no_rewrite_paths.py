"""The spend lines' and reservations' triggers again, closing SQLite's REPLACE and the purge escape any
connection could define or set for itself (controlplane/audit/triggers.py)."""

from django.db import migrations

from controlplane.audit.triggers import migration_ops

forward_lines, _ = migration_ops("ledger_spendline")
forward_reservations, _ = migration_ops("ledger_modelcallreservation")


class Migration(migrations.Migration):
    dependencies = [("ledger", "0005_cache_write_prices")]
    operations = [
        migrations.RunPython(forward_lines, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(forward_reservations, migrations.RunPython.noop, elidable=False),
    ]
