"""Runs on Ray (workers/training/distributed.py), on a real local Ray cluster that this module starts with 2 CPUs
(what needs no cluster: tests/offline/engine/test_distributed_plan.py).

1. The shipped example with 2 rollout actors learns, to the single-process test's bar, with its
   weights synced to the actors after every update (their log-probabilities match the learner's).
2. A stop ends the run cancelled, and nothing of it stays on the cluster.
3. kill -9 of a rollout actor fails the run within 60 s, naming the actor, its pid and host.
4. The asynchronous trainer samples through the rollout actors too.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import ray

from tests.conftest import REPO
from tests.offline.engine.test_distributed_plan import on_ray
from workers.config import load_config
from workers.errors import ConfigError
from workers.reporting import MemoryReporter
from workers.training.distributed import RolloutActorLost, run_on_ray

pytestmark = [pytest.mark.timeout(600), pytest.mark.both_cores, pytest.mark.slow]

# the learner's 1 CPU and two actors' half CPUs fill the 2-CPU cluster exactly
ON_RAY = ["resources.executor=ray", "resources.rollout_actors=2", "resources.threads=1", "resources.actor_cpus=0.5"]


@pytest.fixture(scope="module")
def cluster():
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def cluster_is_empty() -> bool:
    """Every CPU free again: the run's placement group and actors are gone."""
    return ray.available_resources().get("CPU", 0) == ray.cluster_resources()["CPU"]


# 100 steps on the cluster: a hang guard that leaves room for a CI host 2-3 times slower than usual (one such cut the
# default 600 s while the run was still learning)
@pytest.mark.timeout(1500)
def test_the_example_learns_with_two_rollout_actors(cluster):
    cfg = load_config(
        REPO / "examples" / "grpo-arith.yaml",
        ["schedule.steps=100", "schedule.time_limit_s=null", "schedule.save_final=false", "eval.every=100", *ON_RAY],
    )
    reporter = MemoryReporter()
    assert run_on_ray(cfg, reporter) == "succeeded"
    (_, before), (_, after) = reporter.series("eval/pass@1")
    assert 0.10 <= before <= 0.50
    assert after >= before + 0.10, (before, after)  # the bar of a run at the defaults (test_learning.py)
    rewards = [v for _, v in reporter.series("reward/mean")]
    assert sum(rewards[-20:]) / 20 > sum(rewards[:20]) / 20 + 0.05
    assert sum(line.startswith("rollout actor ") for line in reporter.lines) == 2
    # the actors sample from copies: their log-probabilities agree with the learner's only if every update reached them
    diffs = [v for _, v in reporter.series("policy/sampler_logprob_diff")]
    assert len(diffs) == 100 and max(diffs) < 1e-4, max(diffs)
    assert all(v > 0 for _, v in reporter.series("timing/sync_s"))
    assert reporter.states[-1] == ("succeeded", "100 steps")
    assert wait_for(cluster_is_empty, 30)


class StopClock(MemoryReporter):
    """Asks to stop once 3 steps have arrived, and notes when it first did."""

    asked_at: float | None = None

    def should_stop(self):
        if len(self.metric_rows) >= 3 and self.asked_at is None:
            self.asked_at = time.monotonic()
        return self.asked_at is not None


def test_a_stop_cancels_the_run_within_seconds_and_frees_the_cluster(cluster):
    reporter = StopClock()
    assert run_on_ray(on_ray(), reporter) == "cancelled"
    took = time.monotonic() - reporter.asked_at
    assert reporter.states[-1][0] == "cancelled" and took < 5, took  # the platform's bar for a cancel
    assert 3 <= len(reporter.metric_rows) < 10_000
    assert wait_for(cluster_is_empty, 30)


def test_a_killed_rollout_actor_fails_the_run_with_its_cause_within_60_seconds(cluster):
    reporter, outcome = MemoryReporter(), {}

    def drive():
        try:
            outcome["state"] = run_on_ray(on_ray(), reporter)
        except Exception as exc:  # noqa: BLE001 - the test reads what ended the run
            outcome["error"] = exc

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    assert wait_for(lambda: len(reporter.metric_rows) >= 2, 120), reporter.lines
    line = next(line for line in reporter.lines if line.startswith("rollout actor 1: pid "))
    pid = int(line.split("pid ")[1].split()[0])
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    driver.join(60)
    assert not driver.is_alive(), "the run hung after its rollout actor was killed"
    print(f"the run failed {time.monotonic() - killed:.1f} s after the kill")
    error = outcome.get("error")
    assert isinstance(error, RolloutActorLost), outcome
    assert f"rollout actor 1 (pid {pid} on " in str(error)
    assert wait_for(cluster_is_empty, 30)


def test_the_asynchronous_trainer_samples_through_the_rollout_actors(cluster):
    cfg = on_ray(schedule={"steps": 4, "max_staleness": 1})
    reporter = MemoryReporter()
    assert run_on_ray(cfg, reporter) == "succeeded"
    assert [v for _, v in reporter.series("pipeline/async/staleness_max")] == [0.0, 1.0, 1.0, 1.0]
    assert sum(line.startswith("rollout actor ") for line in reporter.lines) == 2  # one set, the pipeline's
    assert all(v > 0 for _, v in reporter.series("timing/sync_s"))


def test_the_command_line_runs_a_config_on_ray(cluster, tmp_path):
    """`python -m workers run` with executor ray: the same files as a local run, the actors' lines in the log."""
    import yaml

    from workers.cli import main
    from workers.reporting import read_metrics

    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(on_ray(schedule={"steps": 3}).model_dump(mode="json")))
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert [row["step"] for row in read_metrics(tmp_path / "run" / "metrics.jsonl")] == [1, 2, 3]
    log = (tmp_path / "run" / "log.txt").read_text()
    assert "rollout actor 0: pid " in log and "rollout actor 1: pid " in log
    assert (tmp_path / "run" / "environment.json").exists()  # written by the learner, where the driver reads it


def test_a_stop_rule_over_the_whole_call_is_refused_naming_its_component(cluster):
    """APRIL stops rows once enough groups of the whole call have finished: no actor sees the whole call."""
    with pytest.raises(ConfigError, match=r"workers\.pipeline\.generate\.april\..*resources\.executor: local"):
        run_on_ray(on_ray(method="april", schedule={"steps": 2}), MemoryReporter())
    assert wait_for(cluster_is_empty, 30)


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()
