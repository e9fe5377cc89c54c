"""`python manage.py import_bundle FILE [--user NAME] [--project imported]`: a bundle as a run of this platform."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from rolloutlab.audit.services import import_bundle
from rolloutlab.runs.access import project_for_launch
from workers import metrics as metric
from workers.bundle import BundleError


class Command(BaseCommand):
    help = "Import a run bundle (refused if any byte of it was altered)"

    def add_arguments(self, parser):
        parser.add_argument("bundle")
        parser.add_argument("--user", default="demo")
        parser.add_argument("--project", default="imported")

    def handle(self, *args, bundle, user, project, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no user named {user!r}")
        try:
            run = import_bundle(bundle, owner, project_for_launch(owner, project))
        except BundleError as exc:
            raise CommandError(str(exc)) from None
        pass1 = run.summary.get(metric.PASS_AT_1, "—")
        self.stdout.write(f"imported run #{run.id}: {run.name} ({pass1} {metric.PASS_AT_1})")
