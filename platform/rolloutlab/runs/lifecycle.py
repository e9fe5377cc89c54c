"""A run's state machine: transitions, lost runs, and the signals other apps listen to.

Everything that moves a run between states goes through `transition`, whatever
process it runs in (web, worker, the monitor). Apps that must act on a run's
life without the runs app knowing them (the audit keeps records and completes
verifications) connect to the signals below in their AppConfig.ready.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from rolloutlab.metrics.realtime import notify
from rolloutlab.runs.models import ALLOWED_TRANSITIONS, EXTERNAL_TRANSITIONS, FINAL_STATES, Kind, Run, State, Transition

log = logging.getLogger(__name__)

# sent with run_id once a run's execution is over and everything it reported is committed
run_ended = Signal()
# sent with run_id, path and kind for each artifact a run reports (its environment record, data fingerprint...)
artifact_reported = Signal()


def transition(run_id: int, to_state: str, cause: str = "", only_from: str | None = None, **fields) -> bool:
    """Move a run to a new state if the state machine allows it (and it is in `only_from`, if given);
    record time and cause; notify watchers."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        allowed = EXTERNAL_TRANSITIONS if run.kind == Kind.EXTERNAL else ALLOWED_TRANSITIONS
        if to_state not in allowed.get(run.state, set()) or only_from not in (None, run.state):
            return False
        now = timezone.now()
        Transition.objects.create(run=run, from_state=run.state, to_state=to_state, cause=cause)
        run.state, run.detail = to_state, cause
        if to_state == State.RUNNING:
            run.started_at, run.finished_at = run.started_at or now, None
        if to_state in FINAL_STATES:
            run.finished_at = now
        for name, value in fields.items():
            setattr(run, name, value)
        run.save()
    notify(run_id, {"kind": "state", "state": to_state, "detail": cause, "step": run.step})
    return True


def mark_lost_runs() -> list[int]:
    """Runs whose worker has not heartbeaten within HEARTBEAT_TIMEOUT_S become lost, and external runs
    whose client has reported nothing within EXTERNAL_RUN_TIMEOUT_S (their reports are their heartbeat)."""
    now, lost = timezone.now(), []
    watched = [
        (Kind.TRAINER, settings.HEARTBEAT_TIMEOUT_S, "no heartbeat from its worker for {} s"),
        (Kind.EXTERNAL, settings.EXTERNAL_RUN_TIMEOUT_S, "no report from its client for {} s"),
    ]
    for kind, timeout_s, why in watched:
        deadline = now - timedelta(seconds=timeout_s)
        stale = Run.objects.filter(state=State.RUNNING, kind=kind, heartbeat_at__lt=deadline)
        for run_id in list(stale.values_list("id", flat=True)):
            cause = why.format(timeout_s)
            if transition(run_id, State.LOST, cause, only_from=State.RUNNING):
                lost.append(run_id)
                log.warning("run %s is lost: %s", run_id, cause)
    return lost
