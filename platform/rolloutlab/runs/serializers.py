"""A run as the API and the pages' JavaScript see it."""

from __future__ import annotations

import math

from rolloutlab.runs.models import Run, RunAttempt


def finite_or_none(value):
    """JSON has no NaN or infinity: a non-finite summary value is sent as null."""
    return value if not isinstance(value, float) or math.isfinite(value) else None


def run_json(run: Run) -> dict:
    return {
        "id": run.id,
        "name": run.name,
        "kind": run.kind,
        "project": run.project.name,
        "team": run.project.team.name,
        "owner": run.owner.get_username(),
        "method": run.method,
        "task": run.task,
        "seed": run.seed,
        "state": run.state,
        "detail": run.detail,
        "step": run.step,
        "total_steps": run.total_steps,
        "train_seconds": finite_or_none(run.train_seconds),
        "config_hash": run.config_hash,
        "queue": run.queue,
        "worker_host": run.worker_host,
        "attempt": run.attempt,  # the number of its latest attempt (0: it never started)
        "parent": run.parent_id,
        "unverified": run.unverified,  # imported from a bundle no trusted key signed, not yet reproduced
        "tags": [t.name for t in run.tags.all()],
        "notes": run.notes,  # the runs table's notes and archive
        "archived": run.archived,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "summary": {k: finite_or_none(v) for k, v in run.summary.items()},
    }


def run_detail_json(run: Run) -> dict:
    """A run with its attempts (one per worker that claimed it: resumes and re-queues after a lost worker)."""
    return {**run_json(run), "attempts": [attempt_json(a) for a in run.attempts.all()]}


def attempt_json(attempt: RunAttempt) -> dict:
    return {
        "number": attempt.number,
        "worker_host": attempt.worker_host,
        "started_at": attempt.started_at.isoformat(),
        "ended_at": attempt.ended_at.isoformat() if attempt.ended_at else None,
        "outcome": attempt.outcome or None,  # none while it runs
        "reason": attempt.reason,
        "resumed_from_step": attempt.resumed_from_step,
    }
