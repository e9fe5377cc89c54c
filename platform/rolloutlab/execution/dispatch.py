"""Handing a queued run to whatever executes it: a Celery worker (team deployment) or a thread here (embedded).

The web side sends the Celery task by name, so it never imports the worker's code
(and with it torch). The embedded mode trains inside this process by design; it
loads the executor through its dotted path when the first run is handed over.

Each run is bounded by its wall time W (limits.wall_time_s): its Celery task gets a soft
time limit of W + grace, which the worker turns into a failed run, and a hard one of
W + 2 x grace, which kills the worker's child; the embedded thread stops at W itself.

Stopping the embedded server (Ctrl-C, SIGTERM) stops its run at the trainer's next stop check and puts it back in
the queue; the next start sends every queued run to its thread again, and the run resumes from its last checkpoint.
"""

from __future__ import annotations

import atexit
import json
import threading
import uuid
from datetime import timedelta
from queue import SimpleQueue

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.module_loading import import_string

from rolloutlab.celery import app
from rolloutlab.execution.limits import wall_time_s
from rolloutlab.runs.models import Run, State
from workers import stopping

EXECUTE_TASK = "runs.execute_run"  # rolloutlab.execution.tasks.execute_run
EMBEDDED_EXECUTE = "rolloutlab.execution.executor.execute"

EMBEDDED_STOP_WAIT_S = 120  # how long a stopping server waits for its run to reach a stop check


def submit(run_id: int) -> None:
    """Send the run's wake-up. On Celery each wake-up has a new task id, recorded on the run before it is sent:
    a worker claims the run only with the latest (lifecycle.claim), so a message the broker redelivers after a
    re-queue or a re-send starts nothing. A send that fails leaves no id, for resend_unsent to try again."""
    queue, config = Run.objects.values_list("queue", "config").get(id=run_id)
    seconds = wall_time_s(config)
    if settings.RUN_EXECUTOR == "celery":
        grace = settings.RUN_TIME_LIMIT_GRACE_S
        task_id = str(uuid.uuid4())
        Run.objects.filter(id=run_id).update(celery_task_id=task_id)
        try:
            app.send_task(EXECUTE_TASK, args=[run_id], queue=queue, task_id=task_id,
                          soft_time_limit=seconds + grace, time_limit=seconds + 2 * grace)  # fmt: skip
        except Exception:
            Run.objects.filter(id=run_id, celery_task_id=task_id).update(celery_task_id="")
            raise
        return
    EmbeddedRunner.get().submit(run_id, seconds)


class EmbeddedRunner:
    """The embedded mode's one run thread: runs execute in the order they were sent, one at a time.

    A daemon thread, so the interpreter's exit does not wait for a run of an hour to end; an atexit hook (which runs
    once daphne has stopped serving) interrupts the run at its next stop check instead, and waits for it to go back
    to the queue (rolloutlab.execution.executor)."""

    _instance: EmbeddedRunner | None = None
    _lock = threading.Lock()

    def __init__(self):
        self.waiting: SimpleQueue[tuple[int, int] | None] = SimpleQueue()
        self.sent: set[int] = set()  # the runs this process has sent to the thread
        self.thread = threading.Thread(target=self.loop, name="embedded-run", daemon=True)
        self.thread.start()
        atexit.register(self.stop)

    @classmethod
    def get(cls) -> EmbeddedRunner:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def submit(self, run_id: int, seconds: int) -> None:
        self.sent.add(run_id)
        self.waiting.put((run_id, seconds))

    def loop(self) -> None:
        while (item := self.waiting.get()) is not None and not stopping.process_interrupted():
            run_id, seconds = item
            try:
                import_string(EMBEDDED_EXECUTE)(run_id, wall_time_s=seconds)
            finally:
                connection.close()

    def stop(self, wait_s: float = EMBEDDED_STOP_WAIT_S) -> None:
        """The server is going away: the running run stops at its next stop check, back to the queue."""
        stopping.interrupt_process()
        self.waiting.put(None)
        self.thread.join(wait_s)


def resubmit_embedded(older_than_s: float) -> list[int]:
    """The queued runs this embedded process has not sent to its thread (those queued when an earlier server was
    stopped, the one it was running among them): send them, oldest first."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    queued = Run.objects.filter(state=State.QUEUED, created_at__lt=cutoff).order_by("id")
    runner = EmbeddedRunner._instance  # none yet: this process has sent nothing (submit makes it)
    sent = runner.sent if runner is not None else set()
    unsent = [run_id for run_id in queued.values_list("id", flat=True)[:100] if run_id not in sent]
    for run_id in unsent:
        submit(run_id)
    return unsent


def resend_unsent(older_than_s: float = 30) -> list[int]:
    """Queued runs whose wake-up never reached the broker (it went away between the launch's check
    and its commit): send it again. The database says which runs exist; the broker only wakes workers."""
    if settings.RUN_EXECUTOR != "celery":
        return resubmit_embedded(older_than_s)
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    unsent = Run.objects.filter(state=State.QUEUED, celery_task_id="", created_at__lt=cutoff)
    ids = list(unsent.values_list("id", flat=True)[:100])
    for run_id in ids:
        submit(run_id)
    return ids


def resend_lost(older_than_s: float | None = None) -> list[int]:
    """Queued runs whose wake-up the broker no longer holds (a broker restarted without its data, or that lost
    its last second of writes): send it again.

    A run is executed once whatever the number of its messages: the worker claims it by its queued -> running
    transition with the latest message's id, and any other message is dropped (lifecycle.claim). So a message
    read as gone while a worker was taking it costs one message that is dropped, never a second execution."""
    if settings.RUN_EXECUTOR != "celery":
        return []
    waited = settings.QUEUE_RECONCILE_AFTER_S if older_than_s is None else older_than_s
    cutoff = timezone.now() - timedelta(seconds=waited)
    waiting = dict(
        Run.objects.filter(state=State.QUEUED, created_at__lt=cutoff).exclude(celery_task_id="")
        .values_list("id", "celery_task_id")[:500]
    )  # fmt: skip
    if not waiting:
        return []
    queues = set(Run.objects.filter(id__in=waiting).values_list("queue", flat=True))
    held = broker_task_ids(queues)
    if held is None:  # a broker whose queues cannot be read: its own durability is all there is
        return []
    lost = [run_id for run_id, task_id in waiting.items() if task_id not in held]
    for run_id in lost:
        submit(run_id)
    return lost


def broker_task_ids(queues: set[str]) -> set[str] | None:
    """The ids of the tasks a Redis broker holds for these queues: waiting, or delivered to a worker and not yet
    acknowledged (acks_late: until the run ends). None for another broker."""
    with app.connection_for_read() as connection_:
        if connection_.transport.driver_type != "redis":
            return None
        channel = connection_.default_channel
        client = channel.client
        waiting = [raw for queue in queues for pri in channel.priority_steps
                   for raw in client.lrange(channel._q_for_pri(queue, pri), 0, -1)]  # fmt: skip
        delivered = [json.loads(raw)[0] for raw in client.hvals(channel.unacked_key)]
    return {message["headers"]["id"] for message in [*map(json.loads, waiting), *delivered]}


def revoke(run: Run) -> None:
    """Take a queued run's task back from the broker (a running one is stopped through cancel_requested)."""
    if run.celery_task_id and settings.RUN_EXECUTOR == "celery":
        app.control.revoke(run.celery_task_id)
