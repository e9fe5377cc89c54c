"""`python manage.py import_bundle FILE [FILE ...] [--user NAME] [--project imported] [--experiment NAME]
[--view QUERY]`: bundles as runs of this platform; with --experiment, the runs of one experiment, whose compare page
is printed (a sweep kept as bundles, e.g. docs/methods/real-model/, opened on the compare page in one command), with
--view the page's settings as well (`metrics=eval/pass@1,completions/mean_length&x=tokens&baseline=grpo`): the
permalink a method card gives."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.http import QueryDict
from django.urls import reverse

from rolloutlab.audit.services import import_bundle
from rolloutlab.compare.permalink import BadView, View, parse_view
from rolloutlab.runs.access import project_for_launch
from rolloutlab.runs.models import Experiment
from workers import metrics as metric
from workers.bundle import BundleError

EXPERIMENT_NAME_MAX = Experiment._meta.get_field("name").max_length


class Command(BaseCommand):
    help = "Import run bundles (each refused if any byte of it was altered), optionally as one experiment"

    def add_arguments(self, parser):
        parser.add_argument("bundles", nargs="+", metavar="bundle")
        parser.add_argument("--user", default="demo")
        parser.add_argument("--project", default="imported")
        parser.add_argument("--experiment", default="", help="gather the runs in a new experiment of this name")
        parser.add_argument("--view", default="", help="the compare page's settings, as in its URL (with --experiment)")

    def handle(self, *args, bundles, user, project, experiment, view, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no user named {user!r}")
        if len(experiment) > EXPERIMENT_NAME_MAX:
            raise CommandError(f"--experiment: at most {EXPERIMENT_NAME_MAX} characters")
        settings = self.compare_view(view, experiment)  # checked before anything is imported
        target = project_for_launch(owner, project)
        with transaction.atomic():  # all of them or none: a sweep is not half imported
            gathered = Experiment.objects.create(project=target, name=experiment, owner=owner) if experiment else None
            runs = [self.import_one(path, owner, target, gathered) for path in bundles]
        if gathered is not None:
            settings.experiment = gathered.id
            self.stdout.write(f"experiment #{gathered.id} ({len(runs)} runs): {reverse('compare:page')}?"
                              f"{settings.query() if view else f'experiment={gathered.id}'}")  # fmt: skip

    @staticmethod
    def compare_view(query: str, experiment: str) -> View:
        if query and not experiment:
            raise CommandError("--view: give --experiment too (the page shows an experiment's runs)")
        if len(query) > 2000:
            raise CommandError("--view: at most 2000 characters")
        params = QueryDict(query, mutable=True)
        for name in ("runs", "experiment"):
            if name in params:
                raise CommandError(f"--view: {name} is set by the import, not by the view")
        params["experiment"] = "1"  # a placeholder to parse against: the experiment is made by the import
        try:
            return parse_view(params)
        except BadView as exc:
            raise CommandError(f"--view: {exc}") from None

    def import_one(self, path: str, owner, project, experiment: Experiment | None):
        try:
            run = import_bundle(path, owner, project)
        except BundleError as exc:
            raise CommandError(str(exc)) from None
        if experiment is not None:
            run.experiment = experiment
            run.save(update_fields=["experiment"])
        run.refresh_from_db(fields=["summary"])  # written by a queryset update as the metrics were stored
        pass1 = run.summary.get(metric.PASS_AT_1, "—")
        self.stdout.write(f"imported run #{run.id}: {run.name} ({pass1} {metric.PASS_AT_1})")
        return run
