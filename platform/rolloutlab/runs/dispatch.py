"""Handing a queued run to whatever executes it: a Celery worker (team deployment) or a thread here (embedded).

The web side sends the Celery task by name, so it never imports the worker's code
(and with it torch). The embedded mode trains inside this process by design; it
loads the executor through its dotted path when the first run is handed over.

Each run is bounded by its wall time W (limits.wall_time_s): its Celery task gets a soft
time limit of W + grace, which the worker turns into a failed run, and a hard one of
W + 2 x grace, which kills the worker's child; the embedded thread stops at W itself.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.module_loading import import_string

from rolloutlab.celery import app
from rolloutlab.runs.limits import wall_time_s
from rolloutlab.runs.models import Run, State

EXECUTE_TASK = "runs.execute_run"  # rolloutlab.runs.tasks.execute_run
EMBEDDED_EXECUTE = "rolloutlab.runs.executor.execute"

_embedded_pool: ThreadPoolExecutor | None = None


def submit(run_id: int) -> None:
    queue, config = Run.objects.values_list("queue", "config").get(id=run_id)
    seconds = wall_time_s(config)
    if settings.RUN_EXECUTOR == "celery":
        grace = settings.RUN_TIME_LIMIT_GRACE_S
        result = app.send_task(EXECUTE_TASK, args=[run_id], queue=queue,
                               soft_time_limit=seconds + grace, time_limit=seconds + 2 * grace)  # fmt: skip
        Run.objects.filter(id=run_id).update(celery_task_id=result.id)
        return
    global _embedded_pool
    if _embedded_pool is None:
        _embedded_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedded-run")
    _embedded_pool.submit(_execute_in_thread, run_id, seconds)


def _execute_in_thread(run_id: int, seconds: int) -> None:
    try:
        import_string(EMBEDDED_EXECUTE)(run_id, wall_time_s=seconds)
    finally:
        connection.close()


def resend_unsent(older_than_s: float = 30) -> list[int]:
    """Queued runs whose wake-up never reached the broker (it went away between the launch's check
    and its commit): send it again. The database says which runs exist; the broker only wakes workers."""
    if settings.RUN_EXECUTOR != "celery":
        return []
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    unsent = Run.objects.filter(state=State.QUEUED, celery_task_id="", created_at__lt=cutoff)
    ids = list(unsent.values_list("id", flat=True)[:100])
    for run_id in ids:
        submit(run_id)
    return ids


def revoke(run: Run) -> None:
    """Take a queued run's task back from the broker (a running one is stopped through cancel_requested)."""
    if run.celery_task_id and settings.RUN_EXECUTOR == "celery":
        app.control.revoke(run.celery_task_id)
