"""What a user can do to a run's execution: launch, cancel, resume, rerun. Pages and the API share these.

State transitions themselves live in rolloutlab.execution.lifecycle; handing a run to its
executor in rolloutlab.execution.dispatch. Deleting a finished run is a matter of its records
(rolloutlab.runs.services.delete_runs).
"""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied
from django.db import transaction

from rolloutlab.accounts import activity
from rolloutlab.accounts.access import Action, may
from rolloutlab.execution.data_paths import confine
from rolloutlab.execution.dispatch import revoke, submit
from rolloutlab.execution.lifecycle import run_ended, send_again, transition
from rolloutlab.execution.limits import check_active_runs, over_limits
from rolloutlab.inputs import UserInputError, control_characters
from rolloutlab.outages import require_broker
from rolloutlab.runs.access import project_for_launch
from rolloutlab.runs.models import RESUMABLE_STATES, Kind, Run, State, Tag, Transition
from rolloutlab.runs.services import imported
from workers.config import RunConfig, resolve
from workers.errors import ConfigError

log = logging.getLogger(__name__)


def validate_config(raw: dict, *, ceilings: bool = True) -> RunConfig:
    """The resolved config (its data paths resolved inside DATA_ROOTS), or ConfigError whose .fields name
    every bad knob. The page, the API, reruns and bundle imports all pass through here."""
    bad_text = control_characters(raw)
    if bad_text:
        raise ConfigError("invalid config", fields=bad_text)
    cfg = resolve(raw)
    too_big = over_limits(cfg) if ceilings else {}
    if too_big:
        raise ConfigError("the config goes over this deployment's limits", fields=too_big)
    return confine(cfg)


def launch_run(user, raw_config: dict, *, project=None, name: str = "", tags=(), experiment=None, parent=None) -> Run:
    """Validate, record a queued run, and hand it to the executor once the row is committed."""
    cfg = validate_config(raw_config)
    require_broker()  # a run recorded while Redis is away would wait for a wake-up that never comes
    check_active_runs(user)
    project = project or project_for_launch(user, "default")
    if not may(user, Action.LAUNCH, project.team_id):
        raise PermissionDenied(f"only a member of team {project.team} may launch runs in its projects")
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
        activity.note(user, "launched", project, activity.run_subject(run))
        transaction.on_commit(lambda: submit(run.id))
    return run


def request_cancel(run: Run, user) -> bool:
    """A queued run is cancelled at once; a running one stops at its next phase boundary.

    Reads the state afresh: the worker may have started the run since `run` was loaded.
    """
    if run.kind == Kind.EXTERNAL:  # its script is told by a 409 on its next report
        if not transition(run.id, State.CANCELLED, f"cancelled by {user}", only_from=State.RUNNING):
            return False
    elif transition(run.id, State.CANCELLED, f"cancelled by {user} before it started", only_from=State.QUEUED):
        revoke(run)
        run_ended.send(sender=Run, run_id=run.id)  # no worker will: e.g. a verification rerun gets its verdict
    elif Run.objects.filter(id=run.id, state=State.RUNNING).update(cancel_requested=True) != 1:
        return False
    activity.note(user, "cancelled", run.project, activity.run_subject(run))
    return True


def resume_run(run: Run, user) -> Run:
    """Queue a failed, cancelled or lost run again: a new attempt continues it from its last checkpoint (the
    same run, its stored steps after the checkpoint replaced), on whichever worker takes it."""
    if run.kind == Kind.EXTERNAL:
        raise UserInputError("an external run is resumed by its own script", {"kind": "external"}, status=409)
    if run.state not in RESUMABLE_STATES:
        raise not_resumable(run.state)
    if imported(run):  # its config was never held to this deployment's ceilings
        message = "the run was imported and never ran here: rerun it (or Verify it) instead"
        raise UserInputError(message, {"run": message}, status=409)
    require_broker()
    check_active_runs(user)
    # the attempts the platform retries on its own are counted again from here; a cancel asked of the run
    # before is done with
    fields = {"requeues": 0, "cancel_requested": False}
    if not transition(run.id, State.QUEUED, f"resumed by {user}", only_from=run.state, **fields):
        raise not_resumable(Run.objects.values_list("state", flat=True).get(id=run.id))  # it moved meanwhile
    activity.note(user, "resumed", run.project, activity.run_subject(run))
    send_again(run.id)  # queued now, whatever the broker says: a wake-up it misses, the monitor sends again
    run.refresh_from_db()
    return run


def not_resumable(state: str) -> UserInputError:
    message = f"the run is {state}; only a failed, cancelled or lost run can be resumed"
    return UserInputError(message, {"state": message}, status=409)


def rerun(run: Run, user) -> Run:
    """The same config as a new run, remembering where it came from."""
    if run.kind == Kind.EXTERNAL:
        raise UserInputError("an external run is rerun by running its script again", status=409)
    tags = list(run.tags.values_list("name", flat=True))
    return launch_run(
        user, run.config, project=run.project, name=f"{run.name} (rerun)", tags=tags,
        experiment=run.experiment, parent=run,
    )  # fmt: skip
