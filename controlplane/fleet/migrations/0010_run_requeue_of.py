import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0009_run_box_address"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="requeue_of",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="requeues", to="fleet.run"),
        ),
    ]
