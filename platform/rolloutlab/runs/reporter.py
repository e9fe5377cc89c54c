"""The platform's Reporter: what the trainer reports lands in the database and reaches the browsers.

Metric points are buffered and written by a background thread every
METRIC_FLUSH_INTERVAL_MS with COPY; only after the commit are they sent to the
run's Channels group, so a browser never shows a point the database lacks.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection

from rolloutlab.metrics.ingest import write_columns
from rolloutlab.metrics.realtime import notify
from rolloutlab.runs import services
from rolloutlab.runs.models import Artifact, LogLine, Run, Sample, State
from workers.reporting import sha256_tree

STOP_CHECK_INTERVAL_S = 0.5
NOTIFY_CHUNK = 10_000  # points per websocket message: a bulk backfill must not become one huge message


class PlatformReporter:
    def __init__(self, run_id: int):
        self.run_id = run_id
        self.summary: dict[str, float] = dict(Run.objects.get(id=run_id).summary)
        self._columns = self._empty_columns()  # buffered points, column by column
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._stop_checked_at, self._stop = 0.0, False
        self._flusher = threading.Thread(target=self._flush_loop, name=f"metrics-run-{run_id}", daemon=True)
        self._flusher.start()

    # ---------------------------------------------------------------- Reporter protocol
    def metrics(self, step: int, values: dict[str, float]) -> None:
        wall, count = time.time(), len(values)
        with self._lock:
            names, steps, numbers, walls = self._columns
            names.extend(values)
            numbers.extend(values.values())
            steps.extend([step] * count)
            walls.extend([wall] * count)
        self._wake.set()

    def samples(self, step: int, samples: list[dict]) -> None:
        Sample.objects.bulk_create([Sample(run_id=self.run_id, step=step, data=s) for s in samples])

    def log(self, line: str) -> None:
        LogLine.objects.create(run_id=self.run_id, text=line)
        notify(self.run_id, {"kind": "log", "lines": [line]})

    def status(self, state: str, detail: str = "") -> None:
        self.flush()  # every point reported before a state change is committed before it
        if state == State.RUNNING:
            Run.objects.filter(id=self.run_id).update(detail=detail)
            return
        services.transition(self.run_id, state, detail)

    def artifact(self, path: str, kind: str) -> None:
        from pathlib import Path

        from rolloutlab.audit.services import keep_record

        Artifact.objects.create(run_id=self.run_id, kind=kind, path=path, sha256=sha256_tree(Path(path)))
        keep_record(self.run_id, path, kind)

    def should_stop(self) -> bool:
        now = time.monotonic()
        if now - self._stop_checked_at > STOP_CHECK_INTERVAL_S:
            self._stop_checked_at = now
            self._stop = Run.objects.filter(id=self.run_id, cancel_requested=True).exists()
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
            if not names:
                return
            self.summary.update(zip(names, values))  # in report order, so the latest value wins
            last_step = max(steps)
            write_columns(self.run_id, names, steps, values, walls)
            train_seconds = self.summary.get("counters/wall_s", 0.0)
            Run.objects.filter(id=self.run_id).update(step=last_step, summary=self.summary, train_seconds=train_seconds)
        for start in range(0, len(names), NOTIFY_CHUNK):
            points: dict[str, list] = {}
            for name, step, value in zip(names[start : start + NOTIFY_CHUNK], steps[start:], values[start:]):
                points.setdefault(name, []).append([step, value])
            notify(self.run_id, {"kind": "points", "points": points})
        notify(self.run_id, {"kind": "progress", "step": last_step, "train_seconds": train_seconds})

    def _flush_loop(self) -> None:
        interval = settings.METRIC_FLUSH_INTERVAL_MS / 1000
        try:
            while not self._closed:
                self._wake.wait()
                self._wake.clear()
                time.sleep(interval)  # gather what arrives meanwhile into the same COPY
                self.flush()
        finally:
            connection.close()  # this thread's own database connection

    def close(self) -> None:
        self._closed = True
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
        from django.utils import timezone

        try:
            while not self._done.wait(settings.HEARTBEAT_INTERVAL_S):
                close_old_connections()
                Run.objects.filter(id=self.run_id, state=State.RUNNING).update(heartbeat_at=timezone.now())
        finally:
            connection.close()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=10)
