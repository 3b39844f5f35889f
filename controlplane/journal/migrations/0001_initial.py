"""The run journal's tables; model-call rows append-only (controlplane/audit/triggers.py)."""

from django.db import migrations, models

from controlplane.audit.triggers import migration_ops

forward_calls, backward_calls = migration_ops("journal_journalcall")


class Migration(migrations.Migration):
    initial = True
    dependencies = [("audit", "0003_no_rewrite_paths")]

    operations = [
        migrations.CreateModel(
            name="JournalBody",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("sha256", models.CharField(max_length=64, unique=True)),
                ("size", models.PositiveBigIntegerField()),
                ("data", models.BinaryField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("last_used_at", models.DateTimeField(db_index=True)),
                ("erased_at", models.DateTimeField(blank=True, null=True)),
                ("erased_reason", models.CharField(blank=True, default="", max_length=200)),
            ],
        ),
        migrations.CreateModel(
            name="JournalCall",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("decision_id", models.CharField(max_length=64, unique=True)),
                ("run_id_ref", models.BigIntegerField(db_index=True)),
                ("grant_slug", models.CharField(max_length=64)),
                ("started_at", models.DateTimeField()),
                ("ended_at", models.DateTimeField()),
                ("method", models.CharField(max_length=16)),
                ("url", models.TextField()),
                ("request_headers", models.JSONField(default=list)),
                ("request_sha256", models.CharField(max_length=64)),
                ("request_parts", models.JSONField(default=list)),
                ("request_size", models.PositiveBigIntegerField()),
                ("request_truncated", models.BooleanField(default=False)),
                ("request_masked", models.PositiveIntegerField(default=0)),
                ("status", models.IntegerField(blank=True, null=True)),
                ("response_headers", models.JSONField(default=list)),
                ("response_sha256", models.CharField(blank=True, default="", max_length=64)),
                ("response_size", models.PositiveBigIntegerField(default=0)),
                ("response_truncated", models.BooleanField(default=False)),
                ("response_masked", models.PositiveIntegerField(default=0)),
                ("response_streamed", models.BooleanField(default=False)),
                ("withheld", models.CharField(blank=True, default="", max_length=200)),
                ("error", models.CharField(blank=True, default="", max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["started_at", "id"],
                     "indexes": [models.Index(fields=["run_id_ref", "started_at"],
                                              name="journal_jou_run_id__a0eba8_idx")]},
        ),
        migrations.RunPython(forward_calls, backward_calls, elidable=False),
    ]
