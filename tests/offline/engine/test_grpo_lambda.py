"""GRPO-lambda: the length penalty counts only in groups whose pass rate reaches the threshold."""

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers import metrics
from workers.config import resolve
from workers.errors import ConfigError
from workers.pipeline.advantage import ADVANTAGES
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer

LIMIT = 8  # max_new_tokens: the length reward is -length / 8
WEIGHTS = {"correct": 1.0, "length": 0.5}


def groups(correct: list[list[int]], lengths: list[list[int]], weights=WEIGHTS):
    """A scored batch of the given groups: correctness, completion lengths, and the parts the trainer computes."""
    flat_correct = [c for g in correct for c in g]
    flat_lengths = [n for g in lengths for n in g]
    batch = scored([len(g) for g in correct])
    batch.correct = torch.tensor(flat_correct, dtype=torch.bool)
    batch.mask = torch.tensor([[1.0] * n + [0.0] * (LIMIT - n) for n in flat_lengths])
    batch.tokens = torch.zeros(len(flat_lengths), LIMIT, dtype=torch.long)
    batch.reward_parts = {
        "correct": torch.tensor(flat_correct, dtype=torch.float),
        "length": -torch.tensor(flat_lengths, dtype=torch.float) / LIMIT,
    }
    batch.rewards = sum(weights[k] * batch.reward_parts[k] for k in weights)
    return batch


def estimate(name, batch, weights=WEIGHTS, **knobs):
    cfg = resolve({"advantage": {"name": name, **knobs}, "reward": {"weights": weights}})
    return ADVANTAGES.get(name)(cfg)(batch)


def grpo_on(batch, rewards):
    """GRPO's advantage of the batch scored by `rewards` instead of its own."""
    batch.rewards = rewards
    return ADVANTAGES.get("group-mean")(resolve({}))(batch).advantages


# group 0: 1 of 4 correct (below 0.5); group 1: 3 of 4 correct (above); lengths differ everywhere
CORRECT = [[1, 0, 0, 0], [1, 1, 1, 0]]
LENGTHS = [[7, 2, 5, 3], [2, 4, 7, 3]]


def test_a_low_accuracy_group_gets_grpos_advantage_on_correctness_alone():
    batch = groups(CORRECT, LENGTHS)
    out = estimate("grpo-lambda", batch, accuracy_threshold=0.5)
    correctness_only = grpo_on(groups(CORRECT, LENGTHS), groups(CORRECT, LENGTHS).reward_parts["correct"])
    torch.testing.assert_close(out.advantages[:4], correctness_only[:4])
    # GRPO on the summed reward would have told the group's wrong completions apart by length
    summed = grpo_on(groups(CORRECT, LENGTHS), groups(CORRECT, LENGTHS).rewards)
    assert len(set(summed[1:4].tolist())) == 3 and len(set(out.advantages[1:4].tolist())) == 1


def test_a_high_accuracy_group_ranks_its_correct_completions_by_length():
    batch = groups(CORRECT, LENGTHS)
    out = estimate("grpo-lambda", batch, accuracy_threshold=0.5)
    short, middle, long_ = (float(out.advantages[i]) for i in (4, 5, 6))  # correct, lengths 2, 4, 7
    assert short > middle > long_
    torch.testing.assert_close(out.advantages[4:], grpo_on(groups(CORRECT, LENGTHS), batch.rewards)[4:])
    assert out.stats[metrics.PENALTY_GATED_GROUPS] == 0.5
    assert out.stats[metrics.GATED_PENALTY_MEAN] == pytest.approx(-0.5 * (2 + 4 + 7 + 3) / 4 / LIMIT)


def test_the_threshold_is_inclusive_and_a_group_just_below_it_is_not_penalised():
    batch = groups([[1, 1, 1, 0]], [[2, 4, 7, 3]])  # pass rate exactly 3/4
    at = estimate("grpo-lambda", batch, accuracy_threshold=0.75)
    above = estimate("grpo-lambda", batch, accuracy_threshold=0.76)
    assert at.stats[metrics.PENALTY_GATED_GROUPS] == 1.0 and above.stats[metrics.PENALTY_GATED_GROUPS] == 0.0
    assert len(set(at.advantages[:3].tolist())) == 3  # the length tells the correct ones apart
    assert len(set(above.advantages[:3].tolist())) == 1  # correctness alone: one advantage for all three
    everywhere = estimate("grpo-lambda", groups(CORRECT, LENGTHS), accuracy_threshold=0.0)
    summed = grpo_on(groups(CORRECT, LENGTHS), groups(CORRECT, LENGTHS).rewards)
    torch.testing.assert_close(everywhere.advantages, summed)  # threshold 0: GRPO with the length penalty


def test_a_penalty_that_is_not_a_reward_of_the_run_is_refused():
    with pytest.raises(ConfigError, match="advantage.penalty: 'length' is not a reward of this run"):
        resolve({"advantage": {"name": "grpo-lambda"}, "reward": {"weights": {"correct": 1.0}}})
    with pytest.raises(ConfigError, match="needs a reward besides"):
        resolve({"advantage": {"name": "grpo-lambda"}, "reward": {"weights": {"length": 1.0}}})


def test_the_grpo_lambda_preset_trains_and_reports_its_gated_share():
    cfg = small_config(method="grpo-lambda", schedule={"steps": 2})
    assert cfg.advantage.name == "grpo-lambda" and set(cfg.reward.weights) == {"correct", "length"}
    reporter = MemoryReporter()
    assert Trainer(cfg, reporter).run() == "succeeded"
    rows = [r for r in reporter.metric_rows if metrics.PENALTY_GATED_GROUPS in r]
    assert len(rows) == 2
    for row in rows:
        assert 0.0 <= row[metrics.PENALTY_GATED_GROUPS] <= 1.0 and "reward/length/mean" in row
