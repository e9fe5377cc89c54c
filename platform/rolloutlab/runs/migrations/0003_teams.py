"""Projects belong to teams.

A deployment from before teams had one shared space: every user saw every run.
Its projects move to one team, "default", of which every existing user becomes a
member (superusers its admins), so nobody loses sight of what they saw before;
an admin then moves projects and people into teams of their own.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def into_default_team(apps, schema_editor):
    Project = apps.get_model("runs", "Project")
    Team = apps.get_model("accounts", "Team")
    Membership = apps.get_model("accounts", "Membership")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    if not Project.objects.exists():
        return
    team, _ = Team.objects.get_or_create(name="default")
    for user in User.objects.all():
        Membership.objects.get_or_create(
            team=team, user=user, defaults={"role": "admin" if user.is_superuser else "member"}
        )
    Project.objects.filter(team__isnull=True).update(team=team)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_teams"),
        ("runs", "0002_component_owned_knobs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="project",
            name="team",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.PROTECT, related_name="projects", to="accounts.team"
            ),
        ),
        migrations.RunPython(into_default_team, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="project",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="projects", to="accounts.team"
            ),
        ),
        migrations.AlterField(model_name="project", name="name", field=models.CharField(max_length=100)),
        migrations.AddConstraint(
            model_name="project",
            constraint=models.UniqueConstraint(fields=("team", "name"), name="project_name_per_team"),
        ),
    ]
