"""A run that trains on nothing says so while it runs: its state line and its log after NO_SIGNAL_STEPS steps in a
row without a learning signal, and the detail of its final state."""

from __future__ import annotations

from tests.configs import small_config
from workers import metrics as metric
from workers.reporting import MemoryReporter
from workers.training.signal import NO_SIGNAL_STEPS, SignalWatch
from workers.training.trainer import Trainer


def test_a_run_whose_groups_never_differ_says_it_learns_nothing_in_its_state_line_log_and_final_state():
    # a random network on three-digit sums: every completion wrong, every group's rewards equal, every advantage 0
    cfg = small_config(model={"warmup_steps": 0}, task={"digits": 3}, schedule={"steps": NO_SIGNAL_STEPS + 2})
    reporter = MemoryReporter()
    assert Trainer(cfg, reporter).run() == "succeeded"
    assert all(row.get(metric.ADVANTAGE_ABS_MEAN, 0.0) == 0.0 for row in reporter.metric_rows)
    # the step's log line; the training phase's closing line repeats the note when the run took over LOG_AFTER_S
    said = [line for line in reporter.lines if line.startswith("step ") and "no learning signal" in line]
    assert said == [f"step {NO_SIGNAL_STEPS}: no learning signal for {NO_SIGNAL_STEPS} steps (every group's rewards "
                    "equal: every advantage 0, nothing trained)"]  # fmt: skip
    assert reporter.states[-1] == ("succeeded", f"{NO_SIGNAL_STEPS + 2} steps; no learning signal for "
                                   f"{NO_SIGNAL_STEPS + 2} steps (every group's rewards equal: every advantage 0, "
                                   "nothing trained)")  # fmt: skip


def test_a_run_that_learns_ends_without_a_note():
    reporter = MemoryReporter()
    assert Trainer(small_config(schedule={"steps": 3}), reporter).run() == "succeeded"
    assert reporter.states[-1] == ("succeeded", "3 steps")


def test_the_watch_counts_steps_in_a_row_and_starts_again_at_a_signal():
    watch = SignalWatch(patience=2)
    flat, learning = {metric.ADVANTAGE_ABS_MEAN: 0.0}, {metric.ADVANTAGE_ABS_MEAN: 0.3}
    assert [bool(watch.observe(m)) for m in (flat, flat, flat, learning, flat)] == [False, True, True, False, False]
    assert watch.observe({}) and watch.just_started()  # a step that kept no group trained nothing either
