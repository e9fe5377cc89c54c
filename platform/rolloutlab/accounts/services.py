"""What a user does to their tokens and an admin to a team: the pages and the API share these."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from rolloutlab import realtime
from rolloutlab.accounts.access import role_of
from rolloutlab.accounts.models import ApiToken, Membership, Role, Team
from rolloutlab.inputs import UserInputError


def issue_token(user, name: str, days: int | None) -> tuple[ApiToken, str]:
    expires = timezone.now() + timedelta(days=days) if days else None
    return ApiToken.issue(user, name, expires_at=expires)


def get_token_for_user(user, token_id: int) -> ApiToken:
    token = ApiToken.objects.filter(id=token_id, user=user).first()  # only one's own tokens exist
    if token is None:
        raise Http404(f"no token #{token_id}")
    return token


def revoke_token(token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


def get_team_for_user(user, team_id: int) -> Team:
    if role_of(user, team_id) is None:
        raise Http404(f"no team #{team_id}")
    return Team.objects.get(id=team_id)


def require_team_admin(user, team: Team) -> None:
    if role_of(user, team.id) != Role.ADMIN:
        raise PermissionDenied("only an admin of the team may change its members")


def set_member(admin, team: Team, username: str, role: Role) -> Membership:
    """Add a user to the team or change their role; the last admin cannot step down."""
    require_team_admin(admin, team)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise UserInputError(f"no user named {username!r}", {"username": "no such user"})
    with transaction.atomic():
        membership, _ = Membership.objects.select_for_update().get_or_create(team=team, user=user)
        if membership.role == Role.ADMIN and role != Role.ADMIN:
            keep_an_admin(team, leaving=membership)
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def remove_member(admin, team: Team, membership_id: int) -> None:
    require_team_admin(admin, team)
    membership = Membership.objects.filter(id=membership_id, team=team).first()
    if membership is None:
        raise Http404(f"no member #{membership_id}")
    with transaction.atomic():
        if membership.role == Role.ADMIN:
            keep_an_admin(team, leaving=membership)
        membership.delete()
        user = membership.user
        transaction.on_commit(lambda: realtime.recheck_access(realtime.access_group(user)))  # its open sockets


def keep_an_admin(team: Team, leaving: Membership) -> None:
    if not team.memberships.filter(role=Role.ADMIN).exclude(id=leaving.id).exists():
        raise UserInputError("a team keeps at least one admin: make another member admin first", status=409)
