"""Progress of the phases of a run that take seconds: loading, model warm-up, evaluation, training.

The trainer installs its reporter for the thread it runs on (as it installs its stop check,
workers.stopping); a long loop then says where it is:

    with progress.phase("warming up the model", total=steps, unit="steps") as warm_up:
        for ...:
            ...
            warm_up.advance()

The innermost phase is the run's state line, `reporter.status("running", "warming up the model: 40/150 steps")`,
sent at most every UPDATE_INTERVAL_S (phases shown as they start aside, a few at once at most): the platform
writes each one to PostgreSQL and to the browsers, so a loop of thousands of iterations costs a few writes a
second. The run's log gets a line every LOG_INTERVAL_S while a phase lasts and one when a phase that took
LOG_AFTER_S or more ends. Where no reporter is installed (a notebook, a test that loads a model by itself),
phases report nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

UPDATE_INTERVAL_S = 0.25  # a phase's counts: at most four state lines a second
ENTRY_BURST = 4  # phases that may show at once as they are entered, one after another
LOG_INTERVAL_S = 10.0
LOG_AFTER_S = 1.0
ETA_AFTER_S = 2.0  # a phase's time left is said once it has run this long (its rate is known)


def time_left(step: int, total: int, step_seconds: float, eval_every: int, eval_seconds: float) -> float:
    """Seconds until a run at `step` of `total` ends: its steps at `step_seconds` each, and the evaluations still due
    (one every `eval_every` steps) at `eval_seconds` each; an ETA from the wall clock would count an evaluation as
    the time of the step it followed."""
    evaluations = total // eval_every - step // eval_every if eval_every else 0
    return max(0, total - step) * step_seconds + evaluations * eval_seconds


def duration(seconds: float) -> str:
    """2 s, 45 s, 3 min, 2 h 5 min: how a time left reads."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{int(seconds // 3600)} h {round(seconds % 3600 / 60)} min"


_local = threading.local()


class Phase:
    """One phase: its name, how far it got of its total (None: a phase that cannot count), and its unit."""

    def __init__(self, name: str, total: int | None, unit: str, log_every_s: float | None):
        self.name, self.total, self.unit, self.log_every_s = name, total, unit, log_every_s
        self.done = 0
        self.started = self.logged_at = time.monotonic()  # the tracker's clock, once it is entered
        self.shown = False  # whether the state line ever showed this phase
        self.note = ""  # what the state line adds after the count (the training phase: no learning signal)

    def line(self, now: float | None = None, ended: bool = False) -> str:
        """ "evaluating: 32/288 completions, about 2 min left": the count, and once it has a rate, the time left
        (none once it ended: a training phase that a token budget ends at step 26 of 200 has nothing left)."""
        if self.total is None:
            return self.name
        text = f"{self.name}: {self.done}/{self.total} {self.unit}".rstrip()
        elapsed = (time.monotonic() if now is None else now) - self.started
        if 0 < self.done < self.total and elapsed >= ETA_AFTER_S and not ended:
            text += f", about {duration(elapsed / self.done * (self.total - self.done))} left"
        return f"{text}; {self.note}" if self.note else text

    def advance(self, count: int = 1) -> None:
        self.done += count
        tracker = getattr(_local, "tracker", None)
        if tracker is not None:
            tracker.show(self)


class Tracker:
    """The phases open on one thread and the reporter they report to."""

    def __init__(self, reporter, clock=time.monotonic):
        self.reporter, self.clock = reporter, clock
        self.phases: list[Phase] = []
        self.sent_at = float("-inf")
        self.entries, self.entries_at = float(ENTRY_BURST), clock()

    def show(self, phase: Phase, force: bool = False) -> None:
        """The phase's line as the state line if it is the innermost one and none was sent too recently."""
        if not self.phases or self.phases[-1] is not phase:
            return
        now = self.clock()
        if force or now - self.sent_at >= UPDATE_INTERVAL_S:
            self.reporter.status("running", phase.line(now))
            self.sent_at, phase.shown = now, True
        if phase.log_every_s is not None and now - phase.logged_at >= phase.log_every_s:
            self.reporter.log(phase.line(now))
            phase.logged_at = now

    def enter(self, phase: Phase) -> None:
        phase.started = phase.logged_at = self.clock()
        self.phases.append(phase)
        self.show(phase, force=self.take_entry())

    def take_entry(self) -> bool:
        """Whether an entering phase may show at once. Entries come in bursts (the dataset, the model, its
        warm-up), so up to ENTRY_BURST may, refilled at one per UPDATE_INTERVAL_S: phases entered every few
        milliseconds (an evaluation at every step of a fast run) still cost a few lines a second. One that may
        not shows at its next advance."""
        now = self.clock()
        self.entries = min(ENTRY_BURST, self.entries + (now - self.entries_at) / UPDATE_INTERVAL_S)
        self.entries_at = now
        if self.entries < 1:
            return False
        self.entries -= 1
        return True

    def leave(self, phase: Phase) -> None:
        self.phases.remove(phase)
        now = self.clock()
        took = now - phase.started
        if took >= LOG_AFTER_S:
            self.reporter.log(f"{phase.line(now, ended=True)} in {took:.1f} s")
        if self.phases:  # back to the enclosing phase's line, at once if this one replaced it on screen
            self.show(self.phases[-1], force=phase.shown)


def install(reporter) -> None:
    """From now on, phases on this thread report to `reporter` (the trainer's, as it starts)."""
    _local.tracker = Tracker(reporter)


def uninstall() -> None:
    _local.tracker = None


@contextmanager
def phase(name: str, total: int | None = None, unit: str = "", log_every_s: float | None = LOG_INTERVAL_S
          ) -> Iterator[Phase]:  # fmt: skip
    """A phase of the run on this thread; advance() the Phase it yields as its work gets done.
    log_every_s: how often the run's log gets the phase's line while it lasts (None: only when it ends)."""
    current = Phase(name, total, unit, log_every_s)
    tracker = getattr(_local, "tracker", None)
    if tracker is None:
        yield current
        return
    tracker.enter(current)
    try:
        yield current
    except BaseException:
        tracker.phases.remove(current)  # the run is stopping or failing: its own status says so
        raise
    tracker.leave(current)
