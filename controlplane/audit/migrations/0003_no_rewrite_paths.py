"""The audit chain's triggers again, closing SQLite's REPLACE and the purge escape any connection could
define or set for itself (controlplane/audit/triggers.py)."""

from django.db import migrations

from controlplane.audit.triggers import migration_ops

forward, backward = migration_ops("audit_auditrecord")


class Migration(migrations.Migration):
    dependencies = [("audit", "0002_append_only_triggers")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=False)]
