"""Running a run: on a Celery worker (team deployment) or in a thread of the web process (embedded).

`execute(run_id)` is the one code path both use: it claims the run (queued ->
running, opening a new attempt; a redelivered or cancelled run is refused),
resumes it from its last checkpoint if an earlier attempt lost its worker
(rolloutlab.execution.resume), heartbeats, trains with the platform's reporter, and
leaves the run in a final state unless a newer attempt fenced it out, a run over
its wall time included: on Celery the task's soft time limit raises
SoftTimeLimitExceeded in it, in a thread (which no signal can interrupt) a
deadline makes the trainer's next stop check raise WallTimeExceeded. This is
worker-side code (it imports the trainer, and with it torch); the web side
hands runs over through rolloutlab.execution.dispatch.
"""

from __future__ import annotations

import logging
import socket
import time
import traceback
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections, connection

from rolloutlab.execution import lifecycle, limits, resume
from rolloutlab.execution.limits import time_limit_message
from rolloutlab.execution.reporter import Heartbeat, Lease, PlatformReporter, Retrying
from rolloutlab.runs.models import Run, State
from workers import stopping
from workers.config import RunConfig
from workers.stopping import Cancelled
from workers.training.checkpoint import ResumePoint, discard
from workers.training.distributed import run_on_ray
from workers.training.trainer import Trainer

log = logging.getLogger(__name__)


def execute(run_id: int, wall_time_s: int | None = None, token: str | None = None) -> str:
    """Train one run to a final state; returns that state, 'skipped' if this worker may not claim it (not queued,
    or `token`, the Celery task's id, is not its latest wake-up), 'fenced' if a newer attempt took it over, or
    'queued' if this process stopped it on its way out (workers.stopping.Interrupted).

    wall_time_s: a deadline for this thread (the embedded executor's); a Celery task has its time limits."""
    close_old_connections()
    host = socket.gethostname()
    attempt = lifecycle.claim(run_id, host, token)
    if attempt is None:
        return "skipped"
    try:
        cfg, artifacts, point, note = begin(run_id, attempt)
    except Exception as exc:  # noqa: BLE001 - e.g. a config this worker's code no longer reads: the run fails
        log.exception("run %s could not begin", run_id)
        lifecycle.transition(run_id, State.FAILED, f"{type(exc).__name__}: {exc}", attempt=attempt)
        announce_end(run_id)
        return State.FAILED
    lease = Lease(run_id, attempt)
    heartbeat = Heartbeat(lease).start()
    reporter = PlatformReporter(run_id, lease)
    if note:
        reporter.log(note)
    stopping.set_deadline(time.monotonic() + wall_time_s if wall_time_s else None)
    interrupted = False
    try:
        train(cfg, artifacts, reporter, point)
    except stopping.Interrupted:  # the server is stopping: the run waits in the queue for the next start
        reporter.write_buffered()
        interrupted = lifecycle.interrupted(run_id, attempt)
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the run must end failed, with the trace
        # The limit may have struck mid-query: that connection is unusable, and the error its
        # cleanup raised hides the time limit, which is still in the exception's context.
        connection.close()
        if over_time(exc):
            message = time_limit_message(limits.wall_time_s(Run.objects.get(id=run_id).config))
            reporter.log(message)
        else:
            reporter.log(traceback.format_exc())
            message = f"{type(exc).__name__}: {exc}"
        reporter.status(State.FAILED, message)
    finally:
        stopping.set_deadline(None)
        heartbeat.stop()
        reporter.close()
    if lease.lost:  # its attempt was closed by whoever took the run over, and the run is not done
        return "fenced"
    if interrupted:  # not ended: it goes on at the next start
        return State.QUEUED
    announce_end(run_id)
    final = Run.objects.filter(id=run_id).values_list("state", flat=True).first()
    if final == State.SUCCEEDED:  # a finished run is never resumed: its checkpoint would only take disk
        discard(artifacts)
    return final or "deleted"  # a run deleted while it ran (an admin's cleanup) has no state left


def announce_end(run_id: int) -> None:
    """run_ended, retried through a database blip as the reporter's writes are: its receivers act once, here
    (the audit compares a verification rerun with its original), so an error would leave that undone for good."""
    Retrying().call(lambda _: lifecycle.run_ended.send(sender=Run, run_id=run_id), "the run's end")


def begin(run_id: int, attempt: int) -> tuple[RunConfig, Path, ResumePoint | None, str]:
    """The run's config and artifacts folder, and where this attempt starts (rolloutlab.execution.resume)."""
    cfg = RunConfig.model_validate(Run.objects.values_list("config", flat=True).get(id=run_id))
    artifacts = Path(settings.STORAGE_ROOT) / "runs" / str(run_id)
    point, note = resume.prepare(run_id, attempt, artifacts)
    return cfg, artifacts, point, note


def over_time(exc: BaseException | None) -> bool:
    """Whether the time limit raised this exception, or one that another raised while handling it."""
    while exc is not None:
        if isinstance(exc, (SoftTimeLimitExceeded, stopping.WallTimeExceeded)):
            return True
        exc = exc.__context__
    return False


def train(cfg: RunConfig, artifacts: Path, reporter: PlatformReporter, point: ResumePoint | None) -> None:
    if cfg.resources.executor == "ray":  # this process drives; a learner and rollout actors on the cluster train
        try:
            run_on_ray(cfg, reporter, artifacts_dir=artifacts, resume=point)
        except Cancelled:
            reporter.status(State.CANCELLED, "cancelled while the run waited for room on the Ray cluster")
        return
    try:
        trainer = Trainer(cfg, reporter, artifacts_dir=artifacts)  # builds (and warm-starts) the model
    except Cancelled:
        reporter.status(State.CANCELLED, "cancelled while the model was being prepared")
        return
    trainer.run(resume=point)  # reports succeeded or cancelled itself
