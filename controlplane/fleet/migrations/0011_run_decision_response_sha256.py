"""The outcome's digest of the response body on the run decision (docs/wire.md, POST /outcome)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("fleet", "0010_run_requeue_of")]

    operations = [
        migrations.AddField(
            model_name="rundecision",
            name="response_sha256",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
