"""The activity log of a team: who launched, cancelled, reran, verified, shared, imported or deleted what."""

from __future__ import annotations

from rolloutlab.accounts.models import Activity


def note(user, action: str, project, subject: str) -> None:
    """One entry, on the project's team; `subject` is what a reader of the log should see ("run #3 grpo-s0")."""
    Activity.objects.create(team_id=project.team_id, project=project, actor=user, action=action, subject=subject[:300])


def run_subject(run) -> str:
    return f"run #{run.id} {run.name}"
