"""External runs: a run's kind, and client keys so that what a client sends again is stored once.

Existing runs are the trainer's; their samples have no key (the partial unique indexes skip them).
"""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0004_unverified_imports"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="client_key",
            field=models.CharField(
                blank=True, help_text="An external run's key at its client", max_length=64, null=True
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="kind",
            field=models.CharField(
                choices=[("trainer", "Trainer"), ("external", "External")], default="trainer", max_length=10
            ),
        ),
        migrations.AddField(
            model_name="sample",
            name="client_key",
            field=models.CharField(blank=True, help_text="Its key at an external client", max_length=64, null=True),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("client_key__isnull", False)),
                fields=("owner", "client_key"),
                name="run_client_key_per_owner",
            ),
        ),
        migrations.AddConstraint(
            model_name="sample",
            constraint=models.UniqueConstraint(
                condition=models.Q(("client_key__isnull", False)),
                fields=("run", "client_key"),
                name="sample_client_key_per_run",
            ),
        ),
    ]
