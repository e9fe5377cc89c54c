"""Running a run: on a Celery worker (team deployment) or in a thread of the web process (embedded).

`execute(run_id)` is the one code path both use: it claims the run (queued ->
running; a redelivered or cancelled run is refused), heartbeats, trains with
the platform's reporter, and always leaves the run in a final state.
"""

from __future__ import annotations

import socket
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from rolloutlab.runs import services
from rolloutlab.runs.models import Run, State
from rolloutlab.runs.reporter import Heartbeat, PlatformReporter

_embedded_pool: ThreadPoolExecutor | None = None


def submit(run_id: int) -> None:
    if settings.RUN_EXECUTOR == "celery":
        from rolloutlab.runs.tasks import execute_run

        run = Run.objects.get(id=run_id)
        result = execute_run.apply_async(args=[run_id], queue=run.queue)
        Run.objects.filter(id=run_id).update(celery_task_id=result.id)
        return
    global _embedded_pool
    if _embedded_pool is None:
        _embedded_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedded-run")
    _embedded_pool.submit(_execute_in_thread, run_id)


def _execute_in_thread(run_id: int) -> None:
    try:
        execute(run_id)
    finally:
        connection.close()


def execute(run_id: int) -> str:
    """Train one run to a final state; returns that state, or 'skipped' if it was not queued."""
    close_old_connections()
    now = timezone.now()
    host = socket.gethostname()
    if not services.transition(run_id, State.RUNNING, f"started on {host}", worker_host=host, heartbeat_at=now):
        return "skipped"
    heartbeat = Heartbeat(run_id).start()
    reporter = PlatformReporter(run_id)
    try:
        train(run_id, reporter)
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the run must end failed, with the trace
        reporter.log(traceback.format_exc())
        reporter.status(State.FAILED, f"{type(exc).__name__}: {exc}")
    finally:
        heartbeat.stop()
        reporter.close()
    from rolloutlab.audit.services import complete_verification

    complete_verification(run_id)  # if this run was a verification rerun, compare it with its original now
    final = Run.objects.filter(id=run_id).values_list("state", flat=True).first()
    return final or "deleted"  # a run deleted while it ran (an admin's cleanup) has no state left


def train(run_id: int, reporter: PlatformReporter) -> None:
    from workers.config import RunConfig
    from workers.trainer import Trainer

    run = Run.objects.get(id=run_id)
    cfg = RunConfig.model_validate(run.config)
    artifacts = Path(settings.STORAGE_ROOT) / "runs" / str(run_id)
    Trainer(cfg, reporter, artifacts_dir=artifacts).run()  # reports succeeded or cancelled itself
