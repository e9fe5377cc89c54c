"""Share links: a signed, expiring, revocable, read-only view of a run or a comparison.

    link, url_token = create_link(user, "run", [run], days=7)
    /share/<url_token>/   opens the run's page to anyone holding it, read-only

The token is the link's id signed with the deployment's SECRET_KEY (Django's
signing), so it cannot be guessed or altered; the row decides whether it still
opens (revoked, expired). Whoever holds it is a `ShareGrant`: a principal that
sees exactly the link's runs, as a viewer, and changes nothing.
"""

from __future__ import annotations

from datetime import timedelta

from django.core import signing
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from rolloutlab import realtime
from rolloutlab.accounts import activity
from rolloutlab.accounts.access import Action, may
from rolloutlab.accounts.models import Role, ShareLink

SALT = "rolloutlab.share-link"
MAX_DAYS = 90


class ShareGrant:
    """The holder of a share link: sees the link's runs, nothing else, and may change nothing."""

    is_authenticated, is_anonymous, is_active, is_staff, is_superuser = True, False, True, False, False
    id = pk = None

    def __init__(self, link: ShareLink):
        self.link, self.run_ids, self.team_id = link, [int(i) for i in link.run_ids], link.team_id

    def get_username(self) -> str:
        return f"share link #{self.link.id}"

    __str__ = get_username

    def role_in(self, team_id: int) -> Role | None:
        return Role.VIEWER if team_id == self.team_id else None


def create_link(user, kind: str, runs: list, query: str = "", days: int = 7) -> tuple[ShareLink, str]:
    """A link to `runs` (Run rows, all of one team, all visible to the user, who must be at least a member)."""
    teams = {run.project.team_id for run in runs}
    if len(teams) != 1:
        raise PermissionDenied("a share link shows the runs of one team")
    team_id = teams.pop()
    if not may(user, Action.LAUNCH, team_id):
        raise PermissionDenied("only a member of the team may share its runs")
    link = ShareLink.objects.create(
        team_id=team_id, created_by=user, kind=kind, run_ids=[run.id for run in runs], query=query,
        expires_at=timezone.now() + timedelta(days=min(max(days, 1), MAX_DAYS)),
    )  # fmt: skip
    subject = ", ".join(activity.run_subject(run) for run in runs[:5]) + (" ..." if len(runs) > 5 else "")
    activity.note(user, "shared", runs[0].project, f"{kind} link #{link.id} ({subject})")
    return link, url_token(link)


def url_token(link: ShareLink) -> str:
    return signing.dumps(link.id, salt=SALT)


def grant_for(token: str) -> ShareGrant | None:
    """The grant a token opens, or None (forged, revoked, expired, or its runs gone)."""
    try:
        link_id = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    now = timezone.now()
    link = ShareLink.objects.filter(id=link_id, revoked_at__isnull=True, expires_at__gt=now).first()
    if link is None:
        return None
    ShareLink.objects.filter(id=link.id).update(last_used_at=now)
    return ShareGrant(link)


def open_grant(token: str) -> ShareGrant:
    grant = grant_for(token)
    if grant is None:
        raise Http404("this share link does not exist, has expired or was revoked")
    return grant


def revoke(user, link_id: int) -> ShareLink:
    """Its creator or an admin of its team revokes a link; to anyone else it does not exist."""
    link = ShareLink.objects.filter(id=link_id).first()
    if link is None or not may(user, Action.VIEW, link.team_id):
        raise Http404(f"no share link #{link_id}")
    if link.created_by_id != user.id and not may(user, Action.CHANGE, link.team_id):
        raise PermissionDenied("only its creator or a team admin may revoke a share link")
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
        # the link's open websockets stop streaming too
        transaction.on_commit(lambda: realtime.recheck_access(realtime.access_group(ShareGrant(link))))
    return link
