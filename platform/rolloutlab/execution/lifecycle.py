"""A run's state machine: transitions, lost runs, and the signals other apps listen to.

Everything that moves a run between states goes through `transition`, whatever
process it runs in (web, worker, the monitor). Apps that must act on a run's
life without the execution side knowing them (the audit keeps records and completes
verifications) connect to the signals below in their AppConfig.ready.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from rolloutlab.execution.dispatch import submit
from rolloutlab.execution.limits import wall_time_s
from rolloutlab.realtime import notify
from rolloutlab.runs.models import FINAL_STATES, TRANSITIONS, Kind, Outcome, Run, RunAttempt, State, Transition

log = logging.getLogger(__name__)

# sent with run_id once a run's execution is over and everything it reported is committed
run_ended = Signal()
# sent with run_id, path and kind for each artifact a run reports (its environment record, data fingerprint...)
artifact_reported = Signal()
# sent with run_id, names, steps and values of the points a run just stored, once they are committed
points_written = Signal()


def transition(
    run_id: int, to_state: str, cause: str = "", only_from: str | None = None, attempt: int | None = None, **fields
) -> bool:
    """Move a run to a new state if the state machine allows it (and it is in `only_from`, and held by `attempt`,
    if given: a worker's own report, refused once a newer attempt fenced it out); record time and cause; notify
    watchers."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if not allowed(run, to_state) or only_from not in (None, run.state) or attempt not in (None, run.attempt):
            return False
        move(run, to_state, cause, fields)
    notify(run_id, {"kind": "state", "state": to_state, "detail": cause, "step": run.step})
    return True


def allowed(run: Run, to_state: str) -> bool:
    return to_state in TRANSITIONS[run.kind].get(run.state, set())


def move(run: Run, to_state: str, cause: str, fields: dict) -> None:
    """The transition itself, in the caller's transaction on the locked run: the run leaving `running` closes its
    open attempt with the same cause (a trip back to the queue closes it as lost)."""
    now = timezone.now()
    Transition.objects.create(run=run, from_state=run.state, to_state=to_state, cause=cause)
    if run.state == State.RUNNING:
        outcome = Outcome.LOST if to_state == State.QUEUED else to_state
        run.attempts.filter(number=run.attempt, ended_at=None).update(ended_at=now, outcome=outcome, reason=cause)
    run.state, run.detail = to_state, cause
    if to_state == State.RUNNING:
        run.started_at, run.finished_at = run.started_at or now, None
    if to_state == State.QUEUED:
        run.finished_at = None
    if to_state in FINAL_STATES:
        run.finished_at = now
    for name, value in fields.items():
        setattr(run, name, value)
    run.save()


def claim(run_id: int, host: str, token: str | None = None) -> int | None:
    """A worker's claim of a queued run: queued -> running, opening a new attempt; returns its number.

    None if the run is not queued (a cancelled run, a redelivered message of a run another attempt holds)
    or if `token`, the id of the wake-up this worker received, is not the run's latest: each submit gives the
    run a new one (rolloutlab.execution.dispatch), so of an old message redelivered by the broker and the new one
    sent when the run was re-queued, only the new one may start it."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(id=run_id).first()
        if run is None or run.state != State.QUEUED or token not in (None, run.celery_task_id):
            return None
        number, now = run.attempt + 1, timezone.now()
        cause = f"started on {host}" + (f" (attempt {number})" if number > 1 else "")
        move(run, State.RUNNING, cause, {"worker_host": host, "heartbeat_at": now, "attempt": number})
        RunAttempt.objects.create(run=run, number=number, worker_host=host, started_at=now)
    notify(run_id, {"kind": "state", "state": State.RUNNING, "detail": cause, "step": run.step})
    return number


def mark_lost_runs() -> list[int]:
    """Runs whose worker has not heartbeaten within HEARTBEAT_TIMEOUT_S are re-queued, to resume from their last
    checkpoint, while they have attempts left (lost_worker), and become lost after that; external runs whose
    client has reported nothing within EXTERNAL_RUN_TIMEOUT_S become lost (their reports are their heartbeat)."""
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
            if kind == Kind.TRAINER:
                moved = lost_worker(run_id, deadline, cause)
            else:
                moved = transition(run_id, State.LOST, cause, only_from=State.RUNNING) and State.LOST
            if moved == State.LOST:  # no worker will say it ended: e.g. a verification rerun gets its verdict
                run_ended.send(sender=Run, run_id=run_id)
            if moved:
                lost.append(run_id)
                log.warning("run %s is %s: %s", run_id, "re-queued" if moved == State.QUEUED else "lost", cause)
    return lost


def lost_worker(run_id: int, deadline, cause: str) -> str | None:
    """A running trainer run whose worker last beat before `deadline`: back to the queue (its attempt closed as
    lost) and sent again while it has attempts left, else lost. Returns the new state; None if the run beat or
    moved meanwhile. The worker, if it is alive, finds on its next write or stop check that it no longer holds
    the run, and stops without a word (rolloutlab.execution.reporter.Lease)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.state != State.RUNNING or run.heartbeat_at is None or run.heartbeat_at >= deadline:
            return None
        worker = f"{cause} ({run.worker_host or 'unknown host'})"
        spent, allowed = seconds_trained(run), wall_time_s(run.config)
        if spent >= allowed:  # e.g. the hard time limit killed a worker that ignored the soft one: no more time
            to_state = State.LOST
            move(run, to_state, f"{worker}; its attempts have used its wall time of {allowed:,} s", {})
        elif run.requeues + 1 < settings.RUN_MAX_ATTEMPTS:
            to_state = State.QUEUED
            move(run, to_state, f"{worker}; re-queued for attempt {run.attempt + 1}", {"requeues": run.requeues + 1})
            transaction.on_commit(lambda: send_again(run_id))
        else:
            to_state = State.LOST
            move(run, to_state, f"{worker}; {run.requeues + 1} attempts in a row lost their worker", {})
    notify(run_id, {"kind": "state", "state": to_state, "detail": run.detail, "step": run.step})
    return to_state


def interrupted(run_id: int, attempt: int) -> bool:
    """A run whose process stopped it on the way out (the embedded server stopped): back to the queue, to resume
    from its last checkpoint when a process executes it again. Its wall time goes on counting across the attempts,
    as after a lost worker; nothing is sent, the next start sends what is queued (dispatch.resubmit_embedded)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.state != State.RUNNING or run.attempt != attempt:
            return False
        cause = f"the server stopped at step {run.step}; it resumes from its last checkpoint when the server starts"
        move(run, State.QUEUED, cause, {"requeues": run.requeues + 1})
    notify(run_id, {"kind": "state", "state": State.QUEUED, "detail": cause, "step": run.step})
    return True


def seconds_trained(run: Run) -> float:
    """The seconds the run's attempts since its launch or last resume have held a worker, the running one included:
    a re-queue gives the run another worker, never more wall time (resources.wall_time_s bounds them together)."""
    now, recent = timezone.now(), run.attempts.order_by("-number")[: run.requeues + 1]
    return sum(((attempt.ended_at or now) - attempt.started_at).total_seconds() for attempt in recent)


def send_again(run_id: int) -> None:
    """The wake-up of a re-queued run; if the broker is away, the monitor's next rounds send it (resend_unsent)."""
    try:
        submit(run_id)
    except Exception:  # noqa: BLE001 - e.g. the broker restarting: the run waits queued, which the monitor sees
        log.warning("run %s was re-queued but its wake-up could not be sent yet", run_id, exc_info=True)


def announce_points(run_id: int, names, steps, values) -> None:
    """points_written, for whatever watches a run's metrics (alerts); a receiver's failure never fails the report."""
    try:
        points_written.send(sender=Run, run_id=run_id, names=list(names), steps=list(steps), values=list(values))
    except Exception:  # noqa: BLE001 - an alert check is best effort: the points are stored
        log.warning("a receiver of run %s's points failed", run_id, exc_info=True)
