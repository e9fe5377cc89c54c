"""Cancel reaches every loop that may take seconds: warm-start, generation, evaluation, updates.

The trainer installs its reporter's `should_stop` for the thread it runs on;
`checkpoint()` is then called inside each long loop and raises Cancelled once a
stop is asked. Between phases alone was not enough: a long warm-start or a long
evaluation kept a cancelled run going for minutes. `should_stop` is the
reporter's (cheap: the platform's polls the database at most twice a second).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

_local = threading.local()


class Cancelled(Exception):
    """The reporter asked the run to stop."""


class WallTimeExceeded(Exception):
    """The run went past the deadline set for its thread (a failure, not a cancel)."""


class Interrupted(Exception):
    """The process that trains is shutting down (the embedded server was stopped): not the run's doing, so the
    run goes back to the queue rather than to a final state."""


_process_stopping = threading.Event()


def interrupt_process() -> None:
    """From now on, checkpoint() on every thread of this process raises Interrupted."""
    _process_stopping.set()


def process_interrupted() -> bool:
    return _process_stopping.is_set()


def set_deadline(deadline: float | None) -> None:
    """From now on, checkpoint() on this thread raises WallTimeExceeded once time.monotonic() passes
    `deadline` (None: no deadline). For an executor that cannot be interrupted by a signal (a thread)."""
    _local.deadline = deadline


def install(should_stop: Callable[[], bool]) -> None:
    """From now on, checkpoint() on this thread raises Cancelled once should_stop() is true (the trainer
    installs its reporter's as it starts; a thread runs one training at a time)."""
    _local.should_stop = should_stop


def uninstall() -> None:
    """Forget this thread's stop check and deadline: what the thread runs next is not the run that installed them."""
    _local.should_stop = _local.deadline = None


def for_another_thread(should_stop: Callable[[], bool]) -> Callable[[], None]:
    """A function that installs `should_stop` and this thread's deadline in the thread that calls it: a helper
    thread of the same run (the asynchronous trainer's rollout thread), stopped by its owner through
    `should_stop` rather than by the reporter's, which may need a connection of the owner's thread."""
    deadline = getattr(_local, "deadline", None)

    def install_here() -> None:
        _local.should_stop, _local.deadline = should_stop, deadline

    return install_here


def checkpoint() -> None:
    if _process_stopping.is_set():
        raise Interrupted()
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise WallTimeExceeded()
    should_stop = getattr(_local, "should_stop", None)
    if should_stop is not None and should_stop():
        raise Cancelled()
