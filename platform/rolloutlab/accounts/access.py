"""The one way any view, consumer or export loads an object: scoped to what the caller may see.

    run = get_run_for_user(request.user, run_id)                 # Http404 unless the user's team holds it
    run = get_run_for_user(request.user, run_id, Action.CHANGE)  # and PermissionDenied unless owner or admin

An object of a team the user does not belong to does not exist for them (404,
never 403, so ids cannot be probed); within a team the role decides what may
change (403). Querysets here are the only place the team filter is written.
"""

from __future__ import annotations

from enum import StrEnum

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404

from rolloutlab.accounts.models import ROLE_RANK, Membership, Role, Team
from rolloutlab.runs.models import Experiment, Project, Run


class Action(StrEnum):
    VIEW = "view"  # read pages, API, exports, bundles, websockets: any role
    LAUNCH = "launch"  # launch runs and sweeps, import bundles: member or admin
    CHANGE = "change"  # cancel, rerun, verify, delete a run: its owner (member+) or a team admin


def role_of(user, team_id: int) -> Role | None:
    if not user.is_authenticated:
        return None
    if hasattr(user, "role_in"):  # a share link's holder (rolloutlab.accounts.sharing.ShareGrant)
        return user.role_in(team_id)
    role = Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()
    return Role(role) if role else None


def is_member(user) -> bool:
    """A logged-in user (or token); not a share link's holder, who sees only the link's runs."""
    return user.is_authenticated and getattr(user, "id", None) is not None


def visible_teams(user) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user) if is_member(user) else Team.objects.none()


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


def may(user, action: Action, team_id: int, owner_id: int | None = None) -> bool:
    role = role_of(user, team_id)
    if role is None:
        return False
    if action == Action.VIEW:
        return True
    if action == Action.LAUNCH:
        return ROLE_RANK[role] >= ROLE_RANK[Role.MEMBER]
    return role == Role.ADMIN or (role == Role.MEMBER and owner_id == user.id)


def _require(user, action: Action, team_id: int, owner_id: int | None, what: str) -> None:
    if action != Action.VIEW and not may(user, action, team_id, owner_id):
        who = "a team member" if action == Action.LAUNCH else "its owner or a team admin"
        raise PermissionDenied(f"only {who} may {action} this {what}")


def get_run_for_user(user, run_id: int, action: Action = Action.VIEW, queryset: QuerySet[Run] | None = None) -> Run:
    base = queryset if queryset is not None else Run.objects.select_related("project", "owner")
    run = base.filter(id=run_id).filter(id__in=visible_runs(user).values("id")).first()
    if run is None:
        raise Http404(f"no run #{run_id}")
    _require(user, action, run.project.team_id, run.owner_id, "run")
    return run


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
    _require(user, action, project.team_id, project.owner_id, "project")
    return project


def get_experiment_for_user(user, experiment_id: int, action: Action = Action.VIEW) -> Experiment:
    experiment = visible_experiments(user).filter(id=experiment_id).select_related("project").first()
    if experiment is None:
        raise Http404(f"no experiment #{experiment_id}")
    _require(user, action, experiment.project.team_id, experiment.owner_id, "experiment")
    return experiment


def project_for_launch(user, name: str) -> Project:
    """The project a launch (or sweep, or import) goes to: the user's project of that name, where they may
    launch, or a new one in their home team."""
    name = name.strip() or "default"
    existing = visible_projects(user).filter(name=name).order_by("id").first()
    if existing is not None:
        _require(user, Action.LAUNCH, existing.team_id, existing.owner_id, "project")
        return existing
    team = home_team(user)
    try:
        with transaction.atomic():
            return Project.objects.create(team=team, name=name, owner=user)
    except IntegrityError:  # a concurrent launch made it first
        return Project.objects.get(team=team, name=name)


def home_team(user) -> Team:
    """The first team the user may launch in; a user with no team at all gets a team of their own."""
    if not is_member(user):
        raise PermissionDenied("a share link opens runs to read; it launches nothing")
    membership = (
        Membership.objects.filter(user=user, role__in=[Role.MEMBER, Role.ADMIN]).order_by("id").select_related("team")
    ).first()
    if membership is not None:
        return membership.team
    if Membership.objects.filter(user=user).exists():
        raise PermissionDenied("viewers may not launch runs: ask a team admin for the member role")
    return personal_team(user)


def personal_team(user) -> Team:
    name, n = user.get_username(), 1
    while Team.objects.filter(name=name).exists():
        n += 1
        name = f"{user.get_username()}-{n}"
    team = Team.objects.create(name=name)
    Membership.objects.create(team=team, user=user, role=Role.ADMIN)
    return team
