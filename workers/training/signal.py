"""Whether a run is learning anything: a run on a real model can go on for an hour with every group's rewards equal
(all wrong at first, or all right), every advantage 0 and so no gradient, and still end "succeeded". The watch
counts such steps in a row; from NO_SIGNAL_STEPS on, the run's state line and its log say so while it runs, and its
final state's detail says how many of the last steps had none.

    watch = SignalWatch()
    note = watch.observe(step, metrics)   # "" while there is a signal
"""

from __future__ import annotations

from workers import metrics as metric

NO_SIGNAL_STEPS = 5


class SignalWatch:
    def __init__(self, patience: int = NO_SIGNAL_STEPS):
        self.patience = patience
        self.streak = 0  # steps in a row without a learning signal

    @staticmethod
    def has_signal(metrics: dict[str, float]) -> bool:
        """A step has a signal when some sample in its loss had a nonzero advantage (no groups kept: none)."""
        return metrics.get(metric.ADVANTAGE_ABS_MEAN, 0.0) > 0.0

    def observe(self, metrics: dict[str, float]) -> str:
        """The state line's note after a step: empty, or how long the run has gone without a learning signal."""
        self.streak = 0 if self.has_signal(metrics) else self.streak + 1
        return self.note()

    def note(self) -> str:
        if self.streak < self.patience:
            return ""
        return (f"no learning signal for {self.streak} steps (every group's rewards equal: every advantage 0, "
                "nothing trained)")  # fmt: skip

    def just_started(self) -> bool:
        """Whether the last step made the streak long enough to say so (the log says it once per streak)."""
        return self.streak == self.patience
