"""The platform's Reporter: what the trainer reports lands in the database and reaches the browsers.

Metric points are buffered and written by a background thread every
METRIC_FLUSH_INTERVAL_MS with COPY; only after the commit are they sent to the
run's Channels group, so a browser never shows a point the database lacks.

A write that fails because the database is unreachable is retried with backoff
(at most REPORTER_RETRY_MAX_S between tries, for up to REPORTER_RETRY_FOR_S in
all) while the trainer goes on and its points wait in the buffer; a retry skips
the points already stored, so nothing is lost and nothing written twice. Once the
write goes through, the run's log says how long it waited and why. Past
REPORTER_BUFFER_POINTS buffered points the trainer itself waits for the database.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.utils import timezone

from rolloutlab import finite
from rolloutlab.execution import lifecycle
from rolloutlab.metrics.ingest import write_columns
from rolloutlab.metrics.models import GroupOutcome
from rolloutlab.realtime import notify, publish_points
from rolloutlab.runs.models import Artifact, LogLine, Run, Sample, State
from workers import metrics as metric
from workers.reporting import sha256_tree
from workers.stopping import Cancelled

STOP_CHECK_INTERVAL_S = 0.5
UNREACHABLE = (OperationalError, InterfaceError)  # the database is down or restarting: worth retrying

log = logging.getLogger(__name__)
T = TypeVar("T")


class Retrying:
    """Calls a database write until it goes through: backoff from 0.25 s doubling to
    REPORTER_RETRY_MAX_S, for at most REPORTER_RETRY_FOR_S; then the last error is raised.

    `call(write, what)` passes the attempt number to `write`, so a retry can skip what
    the first try stored. `notes` collects one line per outage, for the run's log.
    """

    def __init__(self, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.sleep, self.clock = sleep, clock
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def call(self, write: Callable[[int], T], what: str) -> T:
        began, attempt, delay = self.clock(), 0, 0.25
        while True:
            try:
                result = write(attempt)
            except UNREACHABLE as exc:
                if self.clock() - began >= settings.REPORTER_RETRY_FOR_S:
                    raise
                if attempt == 0:
                    log.warning("%s failed (%s); retrying for up to %s s", what, exc, settings.REPORTER_RETRY_FOR_S)
                connection.close()  # a broken connection is not reused: the next try opens a fresh one
                self.sleep(min(delay, settings.REPORTER_RETRY_MAX_S))
                attempt, delay = attempt + 1, delay * 2
                error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                continue
            if attempt:
                waited = self.clock() - began
                with self._lock:
                    self.notes.append(f"{what} retried {attempt} times over {waited:.1f} s after {error}; nothing lost")
            return result

    def take_notes(self) -> list[str]:
        with self._lock:
            notes, self.notes = self.notes, []
        return notes


class Lease:
    """An attempt's hold on its run, shared by the attempt's reporter and heartbeat: the run is the attempt's while
    it is running under the attempt's number (Run.attempt).

    A worker cut off from the database for longer than HEARTBEAT_TIMEOUT_S finds, when it is back, that the run
    went back to the queue, or that a newer attempt on another worker claimed it, or that it was declared lost. The
    lease is then lost for good: the attempt writes nothing more (no point, sample, log line or state) and its
    trainer is told to stop. Each write checks the lease in its own transaction, holding the run's row, so a
    re-queue or a newer claim waits for a write under way, and no write lands after them. `attempt=None`: an
    unfenced lease, for a reporter used outside an executor (benchmarks, tests of the reporter alone).
    """

    def __init__(self, run_id: int, attempt: int | None = None):
        self.run_id, self.attempt = run_id, attempt
        self._lost = threading.Event()
        self._released = False  # this attempt is moving, or has moved, the run to its final state itself

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def mine(self):
        """The run, as a queryset that is empty unless this attempt holds it."""
        runs = Run.objects.filter(id=self.run_id)
        return runs if self.attempt is None else runs.filter(attempt=self.attempt, state=State.RUNNING)

    def hold(self) -> bool:
        """Inside the caller's transaction: lock the run's row if this attempt holds it (True), else lose the
        lease (False). No lock at all for an unfenced lease."""
        if self.attempt is None:
            return True
        if not self.lost and self.mine().select_for_update(no_key=True).exists():
            return True
        self.gone()
        return False

    def end_with(self, move: Callable[[], bool]) -> bool:
        """This attempt's own move of the run to a final state; returns whether it moved. From the moment the move
        may commit, the run leaving `running` is no sign of a newer attempt: a heartbeat or a flush of another
        thread that sees it then must not lose the lease (the executor would take its own run for fenced and skip
        what follows its end). A move refused is that sign: the lease is lost."""
        ended_before = self._released  # a later report (a failure after success) moves nothing and loses nothing
        self._released, moved = True, False  # from before the move may commit until its answer is known
        try:
            moved = move()
        finally:
            self._released = ended_before or moved
        if not self._released:
            self._lose()
        return moved

    def gone(self) -> None:
        """The run is not this attempt's any more (unless it is ending it itself)."""
        if not self._released:
            self._lose()

    def _lose(self) -> None:
        if self.attempt is not None and not self.lost:
            log.warning("run %s: attempt %s no longer holds the run; it stops and writes nothing", self.run_id,
                        self.attempt)  # fmt: skip
            self._lost.set()

    def check(self, run_attempt: int, state: str) -> None:
        """The lease against the run's attempt and state as just read."""
        if self.attempt is not None and (run_attempt != self.attempt or state != State.RUNNING):
            self.gone()


class Dropped(Exception):
    """A write of an attempt that no longer holds its run: rolled back, reported nowhere."""


class PlatformReporter:
    def __init__(self, run_id: int, lease: Lease | None = None):
        self.run_id = run_id
        self.lease = lease or Lease(run_id)
        self.retry = Retrying()
        self.summary: dict[str, float | None] = dict(Run.objects.get(id=run_id).summary)
        self._columns = self._empty_columns()  # buffered points, column by column
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._closing = threading.Event()  # cuts the flusher's gathering pause short
        self._failure: Exception | None = None
        self._stop_checked_at, self._stop = 0.0, False
        self._flusher = threading.Thread(target=self._flush_loop, name=f"metrics-run-{run_id}", daemon=True)
        self._flusher.start()

    # ---------------------------------------------------------------- Reporter protocol
    def metrics(self, step: int, values: dict[str, float]) -> None:
        if self.lease.lost:
            return
        if self._failure is not None:  # the database stayed away past REPORTER_RETRY_FOR_S: the run fails
            raise self._failure
        wall, count = time.time(), len(values)
        with self._lock:
            # backpressure: during a long outage the trainer waits rather than grow the buffer without bound
            self._drained.wait_for(lambda: len(self._columns[0]) < settings.REPORTER_BUFFER_POINTS or self._closed)
            names, steps, numbers, walls = self._columns
            names.extend(values)
            numbers.extend(values.values())
            steps.extend([step] * count)
            walls.extend([wall] * count)
        self._wake.set()

    def samples(self, step: int, samples: list[dict]) -> None:
        rows = [Sample(run_id=self.run_id, step=step, data=s) for s in samples]

        def write(attempt: int) -> None:
            if attempt and Sample.objects.filter(run_id=self.run_id, step=step).exists():
                return  # the first try committed; only its answer was lost
            Sample.objects.bulk_create(rows)

        self.held_write(write, f"samples of step {step}")

    def groups(self, step: int, groups: list[dict]) -> None:
        rows = [GroupOutcome(run_id=self.run_id, step=step, **g) for g in groups]

        def write(attempt: int) -> None:
            if attempt and GroupOutcome.objects.filter(run_id=self.run_id, step=step).exists():
                return  # the first try committed; only its answer was lost
            GroupOutcome.objects.bulk_create(rows)

        self.held_write(write, f"group outcomes of step {step}")

    def held_write(self, write: Callable[[int], T], what: str) -> tuple[bool, T | None]:
        """`write` (retried as Retrying does) in one transaction with the lease's check: (False, None), nothing
        written, once this attempt no longer holds the run."""
        if self.lease.lost:
            return False, None

        def held(attempt: int) -> T:
            with transaction.atomic():
                if not self.lease.hold():
                    raise Dropped()
                return write(attempt)

        try:
            return True, self.retry.call(held, what)
        except Dropped:
            return False, None

    def log(self, line: str) -> None:
        self._log_lines([line])

    def _log_lines(self, lines: list[str]) -> None:
        """The lines, after any notes of writes that had to be retried since the last log line."""
        lines = [*self.retry.take_notes(), *lines]
        if not lines:
            return
        written, _ = self.held_write(
            lambda _: LogLine.objects.bulk_create([LogLine(run_id=self.run_id, text=t) for t in lines]), "a log line"
        )
        if written:
            notify(self.run_id, {"kind": "log", "lines": lines})

    def status(self, state: str, detail: str = "") -> None:
        self.write_buffered()  # every point reported before a state change is committed before it
        if state == State.RUNNING:  # what the run is doing now (workers.progress): its page's state line
            changed = self.retry.call(lambda _: self.lease.mine().update(detail=detail), "the run's detail")
            if changed:
                notify(self.run_id, {"kind": "state", "state": State.RUNNING, "detail": detail})
            else:
                self.lease.gone()
            return
        if self.lease.lost:
            return
        # a worker's own report: refused once its attempt no longer holds the run (a re-queued run stays queued)
        only_from = None if self.lease.attempt is None else State.RUNNING

        def move(_try: int) -> bool:
            return lifecycle.transition(self.run_id, state, detail, only_from=only_from, attempt=self.lease.attempt)

        self.lease.end_with(lambda: self.retry.call(move, f"the move to {state}"))

    def artifact(self, path: str, kind: str) -> None:
        digest = sha256_tree(Path(path))
        written, _ = self.held_write(
            lambda _: Artifact.objects.get_or_create(run_id=self.run_id, kind=kind, path=path, sha256=digest),
            f"the {kind} artifact",
        )
        if written:
            lifecycle.artifact_reported.send(sender=Run, run_id=self.run_id, path=path, kind=kind)

    def should_stop(self) -> bool:
        """A cancel request, or this attempt no longer holding the run (checked at most every half second)."""
        now = time.monotonic()
        if now - self._stop_checked_at > STOP_CHECK_INTERVAL_S:
            self._stop_checked_at = now
            try:
                row = Run.objects.filter(id=self.run_id).values_list("cancel_requested", "attempt", "state").first()
                if row is not None:  # a run deleted meanwhile (an admin's cleanup) has nobody left to tell
                    self._stop = row[0]
                    self.lease.check(*row[1:])
            except UNREACHABLE:  # the database is down: ask again next time, meanwhile train on
                connection.close()
        return self._stop or self.lease.lost

    # ---------------------------------------------------------------- writing
    @staticmethod
    def _empty_columns() -> tuple[list, list, list, list]:
        return [], [], [], []  # names, steps, values, walls

    def flush(self) -> None:
        """Write and announce everything buffered so far. The trainer calls it before each resume checkpoint,
        which claims the steps up to it are stored: an attempt fenced out gets Cancelled instead, so that it never
        writes a checkpoint beside the newer attempt's."""
        self.write_buffered()
        if self.lease.lost:
            raise Cancelled()

    def write_buffered(self) -> None:
        """Write and announce everything buffered so far (any thread may call it)."""
        with self._write_lock:
            with self._lock:
                (names, steps, values, walls), self._columns = self._columns, self._empty_columns()
                self._drained.notify_all()
            if not names:
                return
            # in report order, so the latest value wins; JSON (the jsonb summary) has no NaN or infinity
            self.summary.update(zip(names, map(finite.to_json, values)))
            last_step = max(steps)
            train_seconds = self.summary.get(metric.WALL_S) or 0.0

            def write(attempt: int) -> None:
                write_columns(self.run_id, names, steps, values, walls, skip_stored=attempt > 0)
                Run.objects.filter(id=self.run_id).update(
                    step=last_step, summary=self.summary, train_seconds=train_seconds
                )

            written, _ = self.held_write(write, f"metrics write up to step {last_step}")
        if not written:
            return
        # the last evaluation's seconds too: the page's ETA counts the evaluations still due
        progress = {
            "step": last_step,
            "train_seconds": train_seconds,
            "eval_seconds": self.summary.get(metric.EVAL_S) or 0.0,
        }
        publish_points(self.run_id, names, steps, values, progress)
        lifecycle.announce_points(self.run_id, names, steps, values)
        if self.retry.notes:
            self._log_lines([])  # the run's log says the write waited, and for how long

    def _flush_loop(self) -> None:
        interval = settings.METRIC_FLUSH_INTERVAL_MS / 1000
        try:
            while not self._closed:
                self._wake.wait()
                self._wake.clear()
                self._closing.wait(interval)  # gather what arrives meanwhile into the same COPY
                self.write_buffered()
        except UNREACHABLE as exc:
            log.error("run %s: metrics could not be written for %s s", self.run_id, settings.REPORTER_RETRY_FOR_S)
            self._failure = exc
        finally:
            connection.close()  # this thread's own database connection

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drained.notify_all()
        self._closing.set()
        self._wake.set()
        self._flusher.join(timeout=30)
        self.write_buffered()


class Heartbeat:
    """Marks the run alive every HEARTBEAT_INTERVAL_S from a thread of the worker, while the lease holds: a beat
    that finds the run no longer the attempt's loses the lease and stops."""

    def __init__(self, lease: Lease):
        self.run_id, self.lease, self._done = lease.run_id, lease, threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-run-{self.run_id}", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _beat(self) -> None:
        try:
            while not self._done.wait(settings.HEARTBEAT_INTERVAL_S):
                try:
                    close_old_connections()
                    if not self.lease.mine().filter(state=State.RUNNING).update(heartbeat_at=timezone.now()):
                        self.lease.gone()
                        return
                except UNREACHABLE:  # the database is down: beat again next round (the monitor grants grace)
                    connection.close()
        finally:
            connection.close()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=10)
