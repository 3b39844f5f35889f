"""UPDATE and DELETE on audit records are refused by the database (SQLite and PostgreSQL)."""

from django.db import migrations

from controlplane.audit.triggers import migration_ops

forward, backward = migration_ops("audit_auditrecord")


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(forward, backward, elidable=False)]
