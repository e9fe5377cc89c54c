"""Teams and what a user may do in them; API tokens; the log of who did what.

A user sees a project (and its experiments, runs, exports and websockets) only
through a membership of the project's team. Roles are ordered: a viewer reads,
a member also launches, an admin also cancels, reruns and deletes any run of the
team (a member may do that to the runs they own).
"""

import hashlib
import secrets

from django.conf import settings
from django.db import models


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class Role(models.TextChoices):
    VIEWER = "viewer"
    MEMBER = "member"
    ADMIN = "admin"


ROLE_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team")]

    def __str__(self):
        return f"{self.user} in {self.team} ({self.role})"


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="None: until revoked")
    revoked_at = models.DateTimeField(null=True, blank=True)

    @classmethod
    def issue(cls, user, name: str, expires_at=None) -> tuple["ApiToken", str]:
        """A new token; the raw key is returned once and never stored."""
        raw = "rl_" + secrets.token_urlsafe(32)
        return cls.objects.create(user=user, name=name, digest=hash_token(raw), expires_at=expires_at), raw

    def __str__(self):
        return f"{self.name} ({self.user})"


class Activity(models.Model):
    """One entry of a team's activity log: who launched, cancelled, shared, imported or deleted what."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="activity")
    project = models.ForeignKey("runs.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=20)  # launched, cancelled, resumed, reran, deleted, imported, shared, verified
    subject = models.CharField(max_length=300, help_text="What it was done to, as shown: 'run #12 grpo-arith-s0'")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "activity"


class ShareLink(models.Model):
    """A read-only view of some runs (one run's page, or a comparison) for whoever holds the link.

    The URL carries the link's id signed with the deployment's key (rolloutlab.accounts.sharing);
    the row says whether it still opens: not revoked, not expired.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="share_links")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=[("run", "run"), ("compare", "comparison")])
    run_ids = models.JSONField(help_text="The runs the link shows, and the only ones it opens")
    query = models.TextField(blank=True, help_text="A comparison's permalink query")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
