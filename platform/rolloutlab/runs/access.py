"""The one door to a user's projects, experiments and runs: every view, consumer, export and API loads them here.

    run = get_run_for_user(request.user, run_id)                 # Http404 unless the user's team holds it
    run = get_run_for_user(request.user, run_id, Action.CHANGE)  # and PermissionDenied unless owner or admin
    runs = get_runs_for_user(request.user, [3, 5, 8])            # several at once, 404 naming every unseen id

`get_run_for_user` and `get_runs_for_user` are the only ways in to a user's runs
(`can_see_run` asks the same question without loading the run), `visible_runs` the
only queryset of them for a listing: no view, API, socket or export filters Run by
owner or team itself. An object of a team the user does not belong to does not exist for
them (404, never 403, so ids cannot be probed); within a team the role decides
what may change (403, rolloutlab.accounts.access). The team filter is written
only here.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404

from rolloutlab.accounts.access import Action, home_team, is_member, require
from rolloutlab.runs.models import Experiment, Project, Run


def visible_projects(user) -> QuerySet[Project]:
    if not is_member(user):
        return Project.objects.none()
    return Project.objects.filter(team__memberships__user=user)


def visible_experiments(user) -> QuerySet[Experiment]:
    if not is_member(user):
        return Experiment.objects.none()
    return Experiment.objects.filter(project__team__memberships__user=user)


def visible_runs(user) -> QuerySet[Run]:
    if hasattr(user, "run_ids"):  # a share link's holder
        return Run.objects.filter(id__in=user.run_ids)
    if not is_member(user):
        return Run.objects.none()
    return Run.objects.filter(project__team__memberships__user=user)


def get_run_for_user(user, run_id: int, action: Action = Action.VIEW, queryset: QuerySet[Run] | None = None) -> Run:
    base = queryset if queryset is not None else Run.objects.select_related("project", "owner")
    run = base.filter(id=run_id).filter(id__in=visible_runs(user).values("id")).first()
    if run is None:
        raise Http404(f"no run #{run_id}")
    require(user, action, run.project.team_id, run.owner_id, "run")
    return run


def can_see_run(user, run_id: int) -> bool:
    """Whether get_run_for_user would open the run to the user: a socket asks before it joins the run's group, and
    again when the holder's access changes."""
    return visible_runs(user).filter(id=run_id).exists()


def get_runs_for_user(user, run_ids: list[int]) -> list[Run]:
    """Several runs at once (a comparison, a bulk action), in the order given: 404 naming every id the user cannot
    see (another team's, or none)."""
    found = {run.id: run for run in visible_runs(user).filter(id__in=run_ids).select_related("project")}
    missing = [i for i in run_ids if i not in found]
    if missing:
        raise Http404(f"no run {', '.join(f'#{i}' for i in missing)}")
    return [found[i] for i in run_ids]


def get_project_for_user(user, project_id: int, action: Action = Action.VIEW) -> Project:
    project = visible_projects(user).filter(id=project_id).select_related("team").first()
    if project is None:
        raise Http404(f"no project #{project_id}")
    require(user, action, project.team_id, project.owner_id, "project")
    return project


def get_experiment_for_user(user, experiment_id: int, action: Action = Action.VIEW) -> Experiment:
    experiment = visible_experiments(user).filter(id=experiment_id).select_related("project").first()
    if experiment is None:
        raise Http404(f"no experiment #{experiment_id}")
    require(user, action, experiment.project.team_id, experiment.owner_id, "experiment")
    return experiment


def project_for_launch(user, name: str) -> Project:
    """The project a launch (or sweep, or import) goes to: the user's project of that name, where they may
    launch, or a new one in their home team."""
    name = name.strip() or "default"
    existing = visible_projects(user).filter(name=name).order_by("id").first()
    if existing is not None:
        require(user, Action.LAUNCH, existing.team_id, existing.owner_id, "project")
        return existing
    team = home_team(user)
    try:
        with transaction.atomic():
            return Project.objects.create(team=team, name=name, owner=user)
    except IntegrityError:  # a concurrent launch made it first
        return Project.objects.get(team=team, name=name)
