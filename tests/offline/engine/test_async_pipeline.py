"""The asynchronous trainer (schedule.max_staleness): its lag, its bound on staleness, its determinism.

    python -m pytest -q tests/offline/engine/test_async_pipeline.py

Every run is a real one, on CPU: the tiny model samples in the rollout thread while it trains in
the main thread. k = 0 must be the synchronous trainer, metric for metric; k > 0 must never let a
sample more than k versions older than the learner reach the loss.
"""

from __future__ import annotations

import threading
from functools import cache

import pytest
import torch

from tests.conftest import small_config
from workers import metrics as metric
from workers.config import load_config
from workers.errors import ConfigError
from workers.pipeline.batch import RolloutBatch
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.tasks import Example
from workers.training.asynchronous import StalenessBound
from workers.training.trainer import Trainer

ASYNC_METRICS = (metric.ASYNC_STALENESS_MEAN, metric.ASYNC_STALENESS_MAX, metric.ASYNC_DROPPED_SAMPLES)

# rollout-replay with a buffer larger than the run: groups of the first steps can still be drawn at the
# last, when they are more than 2 versions old
REPLAYING = {"replay": {"name": "rollout-replay", "groups": 3, "capacity": 256}}


class RecordingTrainer(Trainer):
    """A trainer that records, at every update, how many versions older than the learner each row of the
    loss was sampled: what actually reaches the loss, whatever the metrics say."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trained_staleness: list[list[int]] = []
        update = self.learner.update

        def recording(batch: RolloutBatch, step: int = 1, entropies=None) -> dict[str, float]:
            learner_version = step - 1
            self.trained_staleness.append((learner_version - batch.versions[batch.in_loss]).tolist())
            return update(batch, step, entropies)

        self.learner.update = recording


def run(cfg) -> tuple[list[dict[str, float]], RecordingTrainer]:
    reporter = MemoryReporter()
    trainer = RecordingTrainer(cfg, reporter)
    assert trainer.run() == "succeeded"
    return [{k: v for k, v in row.items() if is_deterministic_metric(k)} for row in reporter.metric_rows], trainer


@cache
def replaying_run(max_staleness: int, seed: int = 0):
    return run(small_config(schedule={"steps": 8, "max_staleness": max_staleness}, seed=seed, **REPLAYING))


STATEFUL = {
    # the control stage reads the prompt history and grows groups in further rollout stages
    "xrpo": {},
    # the filter draws more rounds; two passes of two minibatches; an evaluation on the way
    "dapo": {"schedule": {"updates_per_batch": 2, "minibatches": 2}, "eval": {"every": 2}},
}


@pytest.mark.parametrize("method", sorted(STATEFUL))
def test_max_staleness_0_gives_the_synchronous_trainers_metric_stream(method):
    sections = STATEFUL[method]
    schedule = {"steps": 3, **sections.get("schedule", {})}
    others = {k: v for k, v in sections.items() if k != "schedule"}
    synchronous, _ = run(small_config(method=method, schedule=schedule, **others))
    pipelined, _ = run(small_config(method=method, schedule={**schedule, "max_staleness": 0}, **others))
    assert len(pipelined) == len(synchronous) >= 3
    for sync_row, async_row in zip(synchronous, pipelined):
        assert {k: async_row[k] for k in sync_row} == sync_row
        if metric.ASYNC_STALENESS_MAX in async_row:  # a training step, not the evaluation before the first
            assert [async_row[k] for k in ASYNC_METRICS] == [0.0, 0.0, 0.0]
    assert not any(k in row for row in synchronous for k in ASYNC_METRICS)


def test_max_staleness_0_drops_every_replayed_group():
    """A replayed group is at least one version old, so k = 0 trains on fresh samples only."""
    rows, trainer = replaying_run(0)
    replayed = [row["pipeline/replay/replayed_groups"] for row in rows]
    assert sum(replayed) > 0
    group_size = small_config().rollout.group_size
    assert [row[metric.ASYNC_DROPPED_SAMPLES] for row in rows] == [groups * group_size for groups in replayed]
    assert all(s == 0 for step in trainer.trained_staleness for s in step)


@pytest.mark.parametrize("limit", [0, 1])
def test_aprils_continued_rows_are_as_old_as_their_oldest_tokens(limit):
    """APRIL continues unfinished completions at later steps: a row's version is that of the policy that began it,
    so the bound drops a carried group once it is too old (k = 0: every carried group) and never trains it."""
    rows, trainer = run(small_config(method="april", schedule={"steps": 6, "max_staleness": limit}))
    carried = sum(row["pipeline/generate/resumed_rows"] for row in rows)
    assert carried > 0  # groups were carried over to later steps
    assert any(row[metric.ASYNC_DROPPED_SAMPLES] > 0 for row in rows)
    assert all(0 <= s <= limit for step in trainer.trained_staleness for s in step)
    assert all(row[metric.ASYNC_STALENESS_MAX] <= limit for row in rows)


def test_max_staleness_2_never_lets_an_older_sample_reach_the_loss():
    rows, trainer = replaying_run(2)
    assert len(rows) == 8
    assert any(row[metric.ASYNC_DROPPED_SAMPLES] > 0 for row in rows)  # the replay offered older groups
    assert all(row[metric.ASYNC_STALENESS_MAX] <= 2 for row in rows)
    assert max(s for step in trainer.trained_staleness for s in step) == 2  # the bound, reached
    for step in trainer.trained_staleness:
        assert all(0 <= s <= 2 for s in step)


def test_max_staleness_1_trains_each_fresh_batch_one_version_behind():
    """Batch t is sampled by version max(0, t - 2): its staleness at step t is min(t - 1, 1)."""
    rows, trainer = run(small_config(schedule={"steps": 4, "max_staleness": 1}))
    assert [row[metric.ASYNC_STALENESS_MAX] for row in rows] == [0.0, 1.0, 1.0, 1.0]
    assert [row[metric.ASYNC_STALENESS_MEAN] for row in rows] == [0.0, 1.0, 1.0, 1.0]
    assert [row[metric.ASYNC_DROPPED_SAMPLES] for row in rows] == [0.0] * 4
    assert [sorted(set(step)) for step in trainer.trained_staleness] == [[0], [1], [1], [1]]


def test_a_rollout_lag_below_the_bound_samples_fresh_batches_that_many_versions_behind():
    """rollout_lag 1 under max_staleness 2: batch t is sampled by version max(0, t - 2), as with max_staleness 1."""
    rows, trainer = run(small_config(schedule={"steps": 4, "max_staleness": 2, "rollout_lag": 1}))
    assert [row[metric.ASYNC_STALENESS_MAX] for row in rows] == [0.0, 1.0, 1.0, 1.0]
    assert [sorted(set(step)) for step in trainer.trained_staleness] == [[0], [1], [1], [1]]


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"rollout_lag": 1}, "rollout_lag is for asynchronous runs: set max_staleness too"),
        ({"rollout_lag": 2, "max_staleness": 1}, r"rollout_lag \(2\) above max_staleness \(1\)"),
    ],
)
def test_a_rollout_lag_needs_a_bound_at_or_above_it(schedule, message):
    with pytest.raises(ConfigError, match=message) as refused:
        load_config(None, [f"schedule.{knob}={value}" for knob, value in schedule.items()])
    assert "schedule" in str(refused.value)


def test_two_runs_with_the_rollout_thread_give_the_same_stream():
    first, _ = replaying_run(2)
    second, _ = run(small_config(schedule={"steps": 8, "max_staleness": 2}, seed=0, **REPLAYING))
    assert second == first


def test_a_stop_ends_the_pipelined_run_and_its_rollout_thread():
    reporter = MemoryReporter(stop_after=2)
    trainer = Trainer(small_config(schedule={"steps": 6, "max_staleness": 2}), reporter)
    assert trainer.run() == "cancelled"
    assert [row["step"] for row in reporter.metric_rows] == [1, 2]
    assert not [t for t in threading.enumerate() if t.name.startswith("rollout")]


def test_the_time_limit_ends_the_pipelined_run_after_a_step_and_joins_its_rollout_thread():
    reporter = MemoryReporter()
    trainer = Trainer(small_config(schedule={"steps": 6, "max_staleness": 2, "time_limit_s": 1e-6}), reporter)
    assert trainer.run() == "succeeded"
    assert [row["step"] for row in reporter.metric_rows] == [1]
    assert not [t for t in threading.enumerate() if t.name.startswith("rollout")]


def test_every_batch_operation_carries_the_rows_versions():
    def batch(versions, groups):
        n = len(versions)
        return RolloutBatch(
            examples=[Example(f"p{g}", "0") for g in range(groups)],
            group_sizes=[n // groups] * groups,
            prompt_ids=[[1]] * groups,
            tokens=torch.zeros(n, 2, dtype=torch.long),
            logprobs=torch.zeros(n, 2),
            mask=torch.ones(n, 2),
            truncated=torch.zeros(n, dtype=torch.bool),
            texts=[""] * n,
            born_step=1,
            notes=[{} for _ in range(n)],
            versions=torch.tensor(versions),
        )

    a, b = batch([3, 3, 5, 5], 2), batch([7, 7], 1)
    assert RolloutBatch.concat([a, b]).versions.tolist() == [3, 3, 5, 5, 7, 7]
    assert a.select_groups([1]).versions.tolist() == [5, 5]
    grown = a.add_to_groups([0], batch([9], 1))
    assert grown.versions.tolist() == [3, 3, 9, 5, 5]
    bound = StalenessBound(2)
    admitted = bound.admit(grown, learner_version=6)  # group 0 holds a row of version 3: 3 versions old
    assert admitted.versions.tolist() == [5, 5] and bound.dropped == 3
