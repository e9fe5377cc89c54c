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
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.utils import timezone

from rolloutlab.metrics import finite
from rolloutlab.metrics.ingest import write_columns
from rolloutlab.metrics.models import GroupOutcome
from rolloutlab.metrics.realtime import notify, publish_points
from rolloutlab.runs import lifecycle
from rolloutlab.runs.models import Artifact, LogLine, Run, Sample, State
from workers import metrics as metric
from workers.reporting import sha256_tree

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


class PlatformReporter:
    def __init__(self, run_id: int):
        self.run_id = run_id
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

        self.retry.call(write, f"samples of step {step}")

    def groups(self, step: int, groups: list[dict]) -> None:
        rows = [GroupOutcome(run_id=self.run_id, step=step, **g) for g in groups]

        def write(attempt: int) -> None:
            if attempt and GroupOutcome.objects.filter(run_id=self.run_id, step=step).exists():
                return  # the first try committed; only its answer was lost
            GroupOutcome.objects.bulk_create(rows)

        self.retry.call(write, f"group outcomes of step {step}")

    def log(self, line: str) -> None:
        self._log_lines([line])

    def _log_lines(self, lines: list[str]) -> None:
        """The lines, after any notes of writes that had to be retried since the last log line."""
        lines = [*self.retry.take_notes(), *lines]
        if not lines:
            return
        self.retry.call(lambda _: LogLine.objects.bulk_create([LogLine(run_id=self.run_id, text=t) for t in lines]),
                        "a log line")  # fmt: skip
        notify(self.run_id, {"kind": "log", "lines": lines})

    def status(self, state: str, detail: str = "") -> None:
        self.flush()  # every point reported before a state change is committed before it
        if state == State.RUNNING:  # what the run is doing now (workers.progress): its page's state line
            self.retry.call(lambda _: Run.objects.filter(id=self.run_id).update(detail=detail), "the run's detail")
            notify(self.run_id, {"kind": "state", "state": State.RUNNING, "detail": detail})
            return
        self.retry.call(lambda _: lifecycle.transition(self.run_id, state, detail), f"the move to {state}")

    def artifact(self, path: str, kind: str) -> None:
        digest = sha256_tree(Path(path))
        self.retry.call(
            lambda _: Artifact.objects.get_or_create(run_id=self.run_id, kind=kind, path=path, sha256=digest),
            f"the {kind} artifact",
        )
        lifecycle.artifact_reported.send(sender=Run, run_id=self.run_id, path=path, kind=kind)

    def should_stop(self) -> bool:
        now = time.monotonic()
        if now - self._stop_checked_at > STOP_CHECK_INTERVAL_S:
            self._stop_checked_at = now
            try:
                self._stop = Run.objects.filter(id=self.run_id, cancel_requested=True).exists()
            except UNREACHABLE:  # the database is down: ask again next time, meanwhile train on
                connection.close()
        return self._stop

    # ---------------------------------------------------------------- writing
    @staticmethod
    def _empty_columns() -> tuple[list, list, list, list]:
        return [], [], [], []  # names, steps, values, walls

    def flush(self) -> None:
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

            self.retry.call(write, f"metrics write up to step {last_step}")
        publish_points(self.run_id, names, steps, values, {"step": last_step, "train_seconds": train_seconds})
        if self.retry.notes:
            self._log_lines([])  # the run's log says the write waited, and for how long

    def _flush_loop(self) -> None:
        interval = settings.METRIC_FLUSH_INTERVAL_MS / 1000
        try:
            while not self._closed:
                self._wake.wait()
                self._wake.clear()
                self._closing.wait(interval)  # gather what arrives meanwhile into the same COPY
                self.flush()
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
        self.flush()


class Heartbeat:
    """Marks the run alive every HEARTBEAT_INTERVAL_S from a thread of the worker."""

    def __init__(self, run_id: int):
        self.run_id, self._done = run_id, threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-run-{run_id}", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _beat(self) -> None:
        try:
            while not self._done.wait(settings.HEARTBEAT_INTERVAL_S):
                try:
                    close_old_connections()
                    Run.objects.filter(id=self.run_id, state=State.RUNNING).update(heartbeat_at=timezone.now())
                except UNREACHABLE:  # the database is down: beat again next round (the monitor grants grace)
                    connection.close()
        finally:
            connection.close()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=10)
