"""What a run can go through: launch, transitions, cancel, rerun, lost. Pages, API and tasks share these."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rolloutlab.metrics.realtime import notify
from rolloutlab.runs.models import ALLOWED_TRANSITIONS, FINAL_STATES, Project, Run, State, Tag, Transition
from workers.config import RunConfig, resolve

log = logging.getLogger(__name__)


def default_project(user) -> Project:
    project, _ = Project.objects.get_or_create(name="default", defaults={"owner": user})
    return project


def validate_config(raw: dict) -> RunConfig:
    """The resolved config, or ConfigError whose .fields name every bad knob."""
    return resolve(raw)


def launch_run(user, raw_config: dict, *, project=None, name: str = "", tags=(), experiment=None, parent=None) -> Run:
    """Validate, record a queued run, and hand it to the executor once the row is committed."""
    cfg = validate_config(raw_config)
    project = project or default_project(user)
    with transaction.atomic():
        run = Run.objects.create(
            project=project,
            experiment=experiment,
            name=name or f"{cfg.method or 'custom'}-{cfg.task.name}-s{cfg.seed}",
            owner=user,
            parent=parent,
            config=cfg.model_dump(mode="json"),
            config_hash=cfg.config_hash(),
            method=cfg.method or "",
            task=cfg.task.name,
            seed=cfg.seed,
            queue=cfg.queue(),
            total_steps=cfg.schedule.steps,
        )
        run.tags.set([Tag.objects.get_or_create(name=t)[0] for t in tags if t])
        Transition.objects.create(run=run, from_state="", to_state=State.QUEUED, cause=f"launched by {user}")
        transaction.on_commit(lambda: dispatch(run.id))
    return run


def dispatch(run_id: int) -> None:
    from rolloutlab.runs.executor import submit

    submit(run_id)


def transition(run_id: int, to_state: str, cause: str = "", only_from: str | None = None, **fields) -> bool:
    """Move a run to a new state if the state machine allows it (and it is in `only_from`, if given);
    record time and cause; notify watchers."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if to_state not in ALLOWED_TRANSITIONS.get(run.state, set()) or only_from not in (None, run.state):
            return False
        now = timezone.now()
        Transition.objects.create(run=run, from_state=run.state, to_state=to_state, cause=cause)
        run.state, run.detail = to_state, cause
        if to_state == State.RUNNING:
            run.started_at = now
        if to_state in FINAL_STATES:
            run.finished_at = now
        for name, value in fields.items():
            setattr(run, name, value)
        run.save()
    notify(run_id, {"kind": "state", "state": to_state, "detail": cause, "step": run.step})
    return True


def request_cancel(run: Run, user) -> bool:
    """A queued run is cancelled at once; a running one stops at its next phase boundary.

    Reads the state afresh: the worker may have started the run since `run` was loaded.
    """
    if transition(run.id, State.CANCELLED, f"cancelled by {user} before it started", only_from=State.QUEUED):
        revoke(run)
        return True
    return Run.objects.filter(id=run.id, state=State.RUNNING).update(cancel_requested=True) == 1


def revoke(run: Run) -> None:
    if run.celery_task_id and settings.RUN_EXECUTOR == "celery":
        from rolloutlab.celery import app

        app.control.revoke(run.celery_task_id)


def rerun(run: Run, user) -> Run:
    """The same config as a new run, remembering where it came from."""
    tags = list(run.tags.values_list("name", flat=True))
    return launch_run(
        user, run.config, project=run.project, name=f"{run.name} (rerun)", tags=tags,
        experiment=run.experiment, parent=run,
    )  # fmt: skip


def mark_lost_runs() -> list[int]:
    """Runs whose worker has not heartbeaten within HEARTBEAT_TIMEOUT_S become lost."""
    deadline = timezone.now() - timedelta(seconds=settings.HEARTBEAT_TIMEOUT_S)
    stale = list(Run.objects.filter(state=State.RUNNING, heartbeat_at__lt=deadline).values_list("id", flat=True))
    lost = []
    for run_id in stale:
        cause = f"no heartbeat from its worker for {settings.HEARTBEAT_TIMEOUT_S} s"
        if transition(run_id, State.LOST, cause):
            lost.append(run_id)
            log.warning("run %s is lost: %s", run_id, cause)
    return lost
