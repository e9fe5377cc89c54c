"""Report a training loop you run yourself to Rollout Lab: its metrics, samples and how it ended.

    import rolloutlab_client.client as rl

    rl.init(project="gsm8k", config={"lr": 1e-6, "model": "Qwen2.5-0.5B"})  # ROLLOUTLAB_URL, ROLLOUTLAB_TOKEN
    for step in range(100):
        ...
        rl.log({"reward/mean": reward, "policy/loss": loss}, step=step)
    rl.finish()

Imports nothing from Django (only requests and pydantic), so any training script can use it;
docs/client.md says more. `log` only buffers: a background thread sends batches, and while
the server is unreachable or answers 5xx it keeps them and retries with exponential backoff.
Nothing is lost or stored twice: a point is removed from the buffer only once the server
has answered for it, and the server stores a (name, step) once, however often it is sent.
Whatever is buffered is sent at `finish`, which also runs at exit (status "failed" after an
uncaught exception).
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import random
import sys
import threading
import time
import uuid
from typing import Any

import requests
from pydantic import ValidationError

from rolloutlab_client.wire import (
    MAX_POINTS,
    MAX_SAMPLE_TEXT,
    MAX_SAMPLES,
    ExternalRunIn,
    FinishIn,
    Point,
    SampleIn,
)

logger = logging.getLogger("rolloutlab_client.client")

DEFAULT_URL = "http://127.0.0.1:8000"
SAMPLE_FIELDS = {"prompt", "completion", "answer", "reward", "rewards", "advantage", "correct"}
MAX_SAMPLE_BATCH_BYTES = 1_000_000  # well under the server's request body limit (2.5 MB)
RETRY_STATUSES = {408, 429, 500, 502, 503, 504}


class Rejected(Exception):
    """The server refused a request for good (a 4xx other than 408/429): sending it again cannot help."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


class Run:
    """One external run. Use the module's init/log/log_samples/finish, or this class for several at once."""

    def __init__(
        self,
        project: str,
        config: dict[str, Any] | None = None,
        name: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        total_steps: int = 0,
        batch_size: int = 1000,
        flush_interval_s: float = 1.0,
        max_buffer: int = 1_000_000,
        max_backoff_s: float = 30.0,
        request_timeout_s: float = 30.0,
        start_timeout_s: float = 120.0,
    ):
        self.base = (url or os.environ.get("ROLLOUTLAB_URL") or DEFAULT_URL).rstrip("/")
        token = token or os.environ.get("ROLLOUTLAB_TOKEN")
        if not token:
            raise ValueError("no API token: pass token= or set ROLLOUTLAB_TOKEN (make one on the Tokens page)")
        if not 1 <= batch_size <= MAX_POINTS:
            raise ValueError(f"batch_size must be between 1 and {MAX_POINTS}")
        self.batch_size, self.flush_interval_s, self.max_buffer = batch_size, flush_interval_s, max_buffer
        self.max_backoff_s, self.request_timeout_s = max_backoff_s, request_timeout_s
        self.headers = {"Authorization": f"Bearer {token}"}
        self.stats = {"points_sent": 0, "points_stored": 0, "samples_sent": 0, "retries": 0, "rejected": 0}

        given = ExternalRunIn(project=project, name=name or "", config=jsonable(config or {}),
                              total_steps=total_steps, key=uuid.uuid4().hex)  # fmt: skip
        deadline = time.monotonic() + start_timeout_s
        started = self._post(requests.Session(), "/api/runs/external", given.model_dump(), deadline)
        self.id: int = started["id"]
        self.url: str = self.base + started["url"]

        self._points: list[dict] = []  # oldest first; a batch leaves only once the server has it
        self._samples: list[dict] = []
        self._cond = threading.Condition()
        self._oldest_at: float | None = None  # when the oldest buffered item was logged
        self._flushing = self._closing = False
        self._give_up_at: float | None = None  # set by finish(timeout=...): stop retrying then
        self._ended_by_server = False
        self._warned: set[str] = set()
        self.finished = False
        self._sender = threading.Thread(target=self._send_loop, name=f"rolloutlab-run-{self.id}", daemon=True)
        self._sender.start()
        atexit.register(self._at_exit)
        logger.info("Rollout Lab run #%s: %s", self.id, self.url)

    # ---------------------------------------------------------------- what a training loop calls
    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Buffer one value per metric at `step`; (name, step) names a point, so log each once.

        NaN and ±inf are sent by name (JSON has no such numbers) and stored as such: the run page draws a marked
        gap there, as for a run the platform trains. None is skipped, with one warning per name.
        """
        wall = time.time()
        points = []
        for name, value in metrics.items():
            if value is None:
                self._warn_once(name, f"{name} = None at step {step} is no number: skipped")
                continue
            number = float(value)  # a numpy or torch scalar as well
            points.append(Point(name=name, step=step, value=number, wall_time=wall).model_dump())
        self._enqueue(self._points, points)

    def log_samples(self, samples: list[dict[str, Any]], step: int) -> None:
        """Buffer rollout samples of `step`: dicts with prompt, completion, answer, reward, rewards,
        advantage, correct; any other keys are kept as extra columns."""
        rows = []
        for sample in samples:
            row = {k: clean_text(v) if isinstance(v, str) else v for k, v in sample.items() if k in SAMPLE_FIELDS}
            extra = jsonable({k: v for k, v in sample.items() if k not in SAMPLE_FIELDS})
            rows.append(SampleIn(key=uuid.uuid4().hex, step=step, extra=extra, **row).model_dump())
        self._enqueue(self._samples, rows)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything logged so far is stored (True), or `timeout` seconds pass (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing = True
            self._cond.notify_all()
            while self._points or self._samples:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(timeout=left if left is not None else 1.0)
            self._flushing = False
            return not (self._points or self._samples)

    def finish(self, status: str = "finished", detail: str = "", timeout: float = 300.0) -> None:
        """Send what is buffered, then end the run as "finished", "failed" or "cancelled".

        Waits at most `timeout` seconds for an unreachable server; what is still unsent then
        is reported in a warning (and the run becomes lost on the server's side).
        """
        if self.finished:
            return
        given = FinishIn(status=status, detail=detail)
        deadline = time.monotonic() + timeout
        sent = self.flush(timeout)
        with self._cond:
            self._closing, self._give_up_at = True, deadline
            unsent = len(self._points), len(self._samples)
            self._cond.notify_all()
        self._sender.join(timeout=max(0.0, deadline - time.monotonic()) + 1)
        self.finished = True
        if not sent:
            logger.warning("run #%s: %s points and %s samples could not be sent within %s s", self.id, *unsent, timeout)
        if not self._ended_by_server:
            try:
                self._post(requests.Session(), f"/api/runs/{self.id}/finish", given.model_dump(), deadline)
            except (Rejected, TimeoutError) as exc:
                logger.warning("run #%s: could not report its end (%s)", self.id, exc)

    # ---------------------------------------------------------------- buffering
    def _enqueue(self, buffer: list[dict], items: list[dict]) -> None:
        if not items:
            return
        with self._cond:
            if self.finished or self._closing:
                raise RuntimeError(f"run #{self.id} is finished; start another with init()")
            if self._ended_by_server:
                self._warn_once("ended", f"run #{self.id} was ended on the server; nothing more is sent")
                return
            while len(self._points) + len(self._samples) >= self.max_buffer:  # the server is away for long
                self._warn_once("full", f"run #{self.id}: {self.max_buffer} items wait for the server; log waits")
                self._cond.wait(timeout=1.0)
            buffer.extend(items)
            if self._oldest_at is None:
                self._oldest_at = time.monotonic()
            if len(self._points) >= self.batch_size:
                self._cond.notify_all()

    def _next_batch(self) -> tuple[str, list[dict]] | None:
        """The next request to make (under the lock), once one is due; None when closing with nothing left."""
        while True:
            pending = self._points or self._samples
            due = self._flushing or self._closing or len(self._points) >= self.batch_size
            if pending and not due and self._oldest_at is not None:
                due = time.monotonic() - self._oldest_at >= self.flush_interval_s
            if pending and due:
                if self._points:
                    return "points", self._points[: self.batch_size]
                return "samples", samples_batch(self._samples)
            if self._closing and not pending:
                return None
            wait = None if not pending else max(0.01, self.flush_interval_s - (time.monotonic() - self._oldest_at))
            self._cond.wait(timeout=wait if wait is not None else 1.0)

    def _send_loop(self) -> None:
        session = requests.Session()
        while True:
            with self._cond:
                work = self._next_batch()
            if work is None:
                return
            kind, batch = work
            try:
                answer = self._post(session, f"/api/runs/{self.id}/{kind}", {kind: batch}, None)
                self.stats[f"{kind}_sent"] += len(batch)
                self.stats["points_stored"] += answer["stored"] if kind == "points" else 0
            except Rejected as exc:
                self.stats["rejected"] += len(batch)
                if exc.status == 409:  # the run was ended on the server (cancelled, or finished elsewhere)
                    self._ended_by_server = True
                logger.error("run #%s: the server refused %s %s (%s); they are dropped", self.id, len(batch), kind, exc)
            except TimeoutError:  # finish's deadline passed: what is left stays unsent
                return
            with self._cond:
                buffer = self._points if kind == "points" else self._samples
                del buffer[: len(batch)]  # only this thread removes, so these are the items just sent
                if self._ended_by_server:
                    self._points.clear(), self._samples.clear()
                self._oldest_at = time.monotonic() if (self._points or self._samples) else None
                self._cond.notify_all()

    # ---------------------------------------------------------------- the wire
    def _post(self, session: requests.Session, path: str, body: dict, deadline: float | None) -> dict:
        """POST until the server answers for it: retried with exponential backoff and jitter while it is
        unreachable or answers 5xx/408/429; Rejected on any other 4xx; TimeoutError past `deadline`."""
        attempt = 0
        while True:
            try:
                response = session.post(self.base + path, json=body, headers=self.headers,
                                        timeout=(5.0, self.request_timeout_s))  # fmt: skip
                if response.status_code < 400:
                    return response.json()
                if response.status_code not in RETRY_STATUSES:
                    raise Rejected(response.status_code, error_of(response))
                why = f"the server answered {response.status_code}"
            except requests.RequestException as exc:  # refused, reset, timed out: the request may have landed
                why = type(exc).__name__
            # finish() may set a time to give up while this waits; a float attribute is read atomically
            limits = [t for t in (deadline, getattr(self, "_give_up_at", None)) if t is not None]
            limit = min(limits) if limits else None
            delay = min(self.max_backoff_s, 0.25 * 2**attempt) * random.uniform(0.5, 1.0)
            if limit is not None and time.monotonic() + delay > limit:
                raise TimeoutError(f"{path}: {why}; gave up")
            attempt += 1
            self.stats["retries"] += 1
            logger.warning("run #%s: %s; retrying %s in %.1f s", getattr(self, "id", "?"), why, path, delay)
            time.sleep(delay)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    def _at_exit(self) -> None:
        if self.finished:
            return
        timeout = float(os.environ.get("ROLLOUTLAB_EXIT_TIMEOUT_S", 120))
        if _uncaught:
            self.finish("failed", "the script ended with an uncaught exception", timeout=timeout)
        else:
            self.finish("finished", timeout=timeout)


def samples_batch(samples: list[dict]) -> list[dict]:
    """As many of the oldest samples as fit one request (at least one)."""
    batch, size = [], 0
    for sample in samples[:MAX_SAMPLES]:
        size += len(json.dumps(sample, ensure_ascii=False))
        if batch and size > MAX_SAMPLE_BATCH_BYTES:
            break
        batch.append(sample)
    return batch


def clean_text(text: str) -> str:
    """A completion as the server takes it: no NUL (PostgreSQL refuses it), at most MAX_SAMPLE_TEXT characters."""
    text = text.replace("\x00", "\ufffd")
    return text if len(text) <= MAX_SAMPLE_TEXT else text[: MAX_SAMPLE_TEXT - 1] + "…"


def jsonable(value: Any) -> Any:
    """A config as JSON takes it: what JSON cannot encode (a dtype, a path) becomes its str(), NaN null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def error_of(response: requests.Response) -> str:
    try:
        return response.json().get("error", response.text[:200])
    except ValueError:
        return response.text[:200]


# ---------------------------------------------------------------- the module's one current run

_current: Run | None = None
_uncaught = False
_previous_hook = sys.excepthook


def _record_uncaught(kind, value, traceback) -> None:
    global _uncaught
    _uncaught = True
    _previous_hook(kind, value, traceback)


sys.excepthook = _record_uncaught


def init(project: str, config: dict[str, Any] | None = None, name: str | None = None, *,
         url: str | None = None, token: str | None = None, **options) -> Run:  # fmt: skip
    """Start a run (finishing the current one, if any); url and token default to $ROLLOUTLAB_URL and
    $ROLLOUTLAB_TOKEN. `options` are Run's: total_steps, batch_size, flush_interval_s, max_backoff_s..."""
    global _current
    if _current is not None and not _current.finished:
        _current.finish()
    _current = Run(project, config, name, url=url, token=token, **options)
    return _current


def current() -> Run:
    if _current is None:
        raise RuntimeError("no run: call rolloutlab_client.client.init(project=...) first")
    return _current


def log(metrics: dict[str, Any], step: int) -> None:
    current().log(metrics, step)


def log_samples(samples: list[dict[str, Any]], step: int) -> None:
    current().log_samples(samples, step)


def finish(status: str = "finished", detail: str = "", timeout: float = 300.0) -> None:
    current().finish(status, detail, timeout)


__all__ = ["Rejected", "Run", "ValidationError", "current", "finish", "init", "log", "log_samples"]
