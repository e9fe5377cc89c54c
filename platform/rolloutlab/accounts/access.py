"""What a user may do in a team: their role, the actions it allows, the teams they see, where they launch.

    may(user, Action.CHANGE, team_id, owner_id)   # a member changes what they own, an admin anything
    require(user, Action.LAUNCH, team_id, None, "project")  # or PermissionDenied naming who may

Roles are the accounts' own; the door to the team's projects, experiments and runs
is rolloutlab.runs.access, which asks these functions what a role allows.
"""

from __future__ import annotations

from enum import StrEnum

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from rolloutlab.accounts.models import ROLE_RANK, Membership, Role, Team


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


def may(user, action: Action, team_id: int, owner_id: int | None = None) -> bool:
    role = role_of(user, team_id)
    if role is None:
        return False
    if action == Action.VIEW:
        return True
    if action == Action.LAUNCH:
        return ROLE_RANK[role] >= ROLE_RANK[Role.MEMBER]
    return role == Role.ADMIN or (role == Role.MEMBER and owner_id == user.id)


def require(user, action: Action, team_id: int, owner_id: int | None, what: str) -> None:
    if action != Action.VIEW and not may(user, action, team_id, owner_id):
        who = "a team member" if action == Action.LAUNCH else "its owner or a team admin"
        raise PermissionDenied(f"only {who} may {action} this {what}")


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
