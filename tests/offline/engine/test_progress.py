"""Progress: the phases that take seconds say how far they got, through the reporter, a few times a second."""

import os
import subprocess
import sys
import time

import yaml

from tests.conftest import REPO, small_config
from workers import progress
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def warm_up_lines(reporter: MemoryReporter) -> list[str]:
    """The warm-up's counts as the state line said them (the time left that follows a count aside)."""
    return [detail.split(", about ")[0] for _, detail in reporter.states if detail.startswith("warming up the model")]


def test_the_warm_up_of_a_model_never_built_reports_each_step_and_logs_its_duration(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "fresh"))
    monkeypatch.setattr(progress, "UPDATE_INTERVAL_S", 1e-9)  # every update shown (the throttle is tested below)
    monkeypatch.setattr(progress, "LOG_AFTER_S", 0.0)
    reporter = MemoryReporter()
    Trainer(small_config(model={"warmup_steps": 40}), reporter)
    assert warm_up_lines(reporter) == [f"warming up the model: {done}/40 steps" for done in range(41)]
    assert reporter.states[:2] == [("running", "loading the dataset"), ("running", "loading the model")]
    assert reporter.states[-1] == ("running", "loading the model")  # back to the enclosing phase
    assert [state for state, _ in reporter.states] == ["running"] * len(reporter.states)
    assert any(line.startswith("warming up the model: 40/40 steps in ") for line in reporter.lines), reporter.lines


def test_a_model_already_in_the_cache_reports_no_warm_up(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "cache"))
    cfg = small_config(model={"warmup_steps": 20})
    Trainer(cfg, MemoryReporter())
    again = MemoryReporter()
    Trainer(cfg, again)
    assert warm_up_lines(again) == [] and ("running", "loading the model") in again.states


def test_an_evaluation_reports_the_completions_it_generated():
    reporter = MemoryReporter()
    trainer = Trainer(small_config(eval={"every": 1, "size": 16, "samples": 4, "k": 2}), reporter)
    reporter.states.clear()
    time.sleep(progress.UPDATE_INTERVAL_S)  # the set-up's own lines were just sent
    trainer.evaluate(0)
    assert reporter.states[0] == ("running", "evaluating: 0/80 completions")  # 16 greedy + 16 x 4 sampled


def test_state_lines_are_throttled_to_four_a_second_however_fast_a_loop_advances():
    clock, reporter = Clock(), MemoryReporter()
    tracker = progress.Tracker(reporter, clock=clock)
    phase = progress.Phase("warming up the model", total=10_000, unit="steps", log_every_s=None)
    tracker.enter(phase)
    for _ in range(10_000):  # ten thousand steps of 0.2 ms: two seconds
        clock.now += 0.0002
        phase.done += 1
        tracker.show(phase)
    assert 8 <= len(reporter.states) <= 9  # the first line, then one every 0.25 s
    assert reporter.lines == []


def test_a_long_phase_logs_its_line_every_ten_seconds_and_once_it_ends():
    clock, reporter = Clock(), MemoryReporter()
    tracker = progress.Tracker(reporter, clock=clock)
    phase = progress.Phase("loading the dataset", total=30, unit="files", log_every_s=10.0)
    tracker.enter(phase)
    for _ in range(30):
        clock.now += 1.0
        phase.done += 1
        tracker.show(phase)
    tracker.leave(phase)
    # a rate of 1 file a second: the time left is said beside the count, once the phase has run 2 s
    counts = ["loading the dataset: 10/30 files, about 20 s left", "loading the dataset: 20/30 files, about 10 s left",
              "loading the dataset: 30/30 files"]  # fmt: skip
    assert reporter.lines == [*counts, "loading the dataset: 30/30 files in 30.0 s"]


def test_a_phase_that_ends_before_its_total_logs_no_time_left():
    clock, reporter = Clock(), MemoryReporter()
    tracker = progress.Tracker(reporter, clock=clock)
    phase = progress.Phase("training", total=200, unit="steps", log_every_s=None)
    tracker.enter(phase)
    for _ in range(26):  # a rollout-token budget ends the run at step 26
        clock.now += 100.0
        phase.done += 1
        tracker.show(phase)
    assert "left" in reporter.states[-1][1]  # while it ran, the state line said the time left
    tracker.leave(phase)
    assert reporter.lines == ["training: 26/200 steps in 2600.0 s"]


def test_phases_entered_in_a_burst_show_at_once_and_a_flood_of_them_a_few_a_second():
    clock, reporter = Clock(), MemoryReporter()
    tracker = progress.Tracker(reporter, clock=clock)
    for _ in range(1000):  # an evaluation of 1 ms at each step of 1 ms: one second
        evaluating = progress.Phase("evaluating", total=16, unit="completions", log_every_s=None)
        tracker.enter(evaluating)
        clock.now += 0.001
        tracker.leave(evaluating)
        clock.now += 0.001
    shown = sum(detail.startswith("evaluating") for _, detail in reporter.states)
    assert progress.ENTRY_BURST <= shown <= progress.ENTRY_BURST + 2 / progress.UPDATE_INTERVAL_S


def test_the_enclosing_phase_comes_back_on_the_state_line_when_a_nested_one_ends():
    clock, reporter = Clock(), MemoryReporter()
    tracker = progress.Tracker(reporter, clock=clock)
    training = progress.Phase("training", total=4, unit="steps", log_every_s=None)
    tracker.enter(training)
    clock.now += 1.0
    evaluating = progress.Phase("evaluating", total=16, unit="completions", log_every_s=None)
    tracker.enter(evaluating)
    tracker.leave(evaluating)  # at once: no throttle may leave "evaluating" on the state line
    assert [detail for _, detail in reporter.states] == [
        "training: 0/4 steps", "evaluating: 0/16 completions", "training: 0/4 steps"]  # fmt: skip


def test_phases_on_a_thread_without_a_reporter_report_nothing_and_still_count():
    progress.uninstall()
    with progress.phase("evaluating", total=3, unit="completions") as evaluating:
        evaluating.advance(3)
    assert evaluating.done == 3


def test_the_command_line_prints_the_warm_up_of_a_model_it_builds(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(small_config(model={"warmup_steps": 200}).model_dump(mode="json")))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ROLLOUTLAB_CACHE": str(tmp_path / "fresh")}
    command = [sys.executable, "-m", "workers", "run", str(config), "--out", str(tmp_path / "out")]
    out = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "warming up the model: 0/200 steps" in out.stderr
    assert "warming up the model: 200/200 steps" in out.stderr  # its last count, or its log line once it ended
