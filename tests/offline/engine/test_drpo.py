"""DRPO: correct completions share GRPO's correctness advantage by exp(length reward / lambda) among themselves."""

import math

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_grpo_lambda import LIMIT, groups, grpo_on
from workers import metrics
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer

WEIGHTS = {"correct": 1.0, "length": 1.0}


def drpo(batch, **knobs):
    cfg = resolve({"advantage": {"name": "drpo", **knobs}, "reward": {"weights": WEIGHTS}})
    return ADVANTAGES.get("drpo")(cfg)(batch)


# one group of six: four correct of lengths 1, 3, 5, 8 (the last at the limit), two wrong of lengths 1 and 2
CORRECT = [[1, 1, 1, 1, 0, 0]]
LENGTHS = [[1, 3, 5, 8, 1, 2]]


def test_a_long_correct_completion_stays_positive_where_grpo_with_the_length_penalty_pushes_it_down():
    grpo = grpo_on(groups(CORRECT, LENGTHS, WEIGHTS), groups(CORRECT, LENGTHS, WEIGHTS).rewards)
    assert float(grpo[3]) < 0  # correct but long: below the group's mean of correct + length
    out = drpo(groups(CORRECT, LENGTHS, WEIGHTS), kl_lambda=0.2)
    assert (out.advantages[:4] > 0).all()
    assert out.stats[metrics.CORRECT_NEGATIVE] == 0.0


def test_shorter_correct_completions_weigh_more_and_the_weights_are_the_closed_form():
    batch = groups(CORRECT, LENGTHS, WEIGHTS)
    lam = 0.5
    out = drpo(batch, kl_lambda=lam)
    correct_only = grpo_on(groups(CORRECT, LENGTHS, WEIGHTS), batch.reward_parts["correct"])
    exp = [math.exp(-n / LIMIT / lam) for n in LENGTHS[0][:4]]
    for i in range(4):
        expected = 4 * exp[i] / sum(exp) * float(correct_only[i])
        assert float(out.advantages[i]) == pytest.approx(expected, rel=1e-5)
    advantages = out.advantages[:4].tolist()
    assert advantages == sorted(advantages, reverse=True) and len(set(advantages)) == 4
    # the correct ones carry GRPO's total correctness advantage between them, redistributed
    assert float(out.advantages[:4].sum()) == pytest.approx(float(correct_only[:4].sum()), rel=1e-5)
    assert out.stats[metrics.POSITIVE_WEIGHT_MAX] == pytest.approx(4 * exp[0] / sum(exp), rel=1e-5)


def test_wrong_completions_keep_grpos_correctness_advantage_whatever_their_length():
    batch = groups(CORRECT, LENGTHS, WEIGHTS)
    out = drpo(batch)
    correct_only = grpo_on(groups(CORRECT, LENGTHS, WEIGHTS), batch.reward_parts["correct"])
    torch.testing.assert_close(out.advantages[4:], correct_only[4:])
    assert out.advantages[4] == out.advantages[5]  # lengths 1 and 2, one advantage


def test_a_large_lambda_is_grpo_on_correctness_and_a_solved_group_shares_the_solved_advantage():
    batch = groups([[1, 1, 0, 0], [1, 1, 1]], [[2, 7, 3, 4], [2, 4, 8]], WEIGHTS)
    flat = drpo(batch, kl_lambda=100.0)
    correct_only = grpo_on(groups([[1, 1, 0, 0], [1, 1, 1]], [[2, 7, 3, 4], [2, 4, 8]], WEIGHTS),
                           batch.reward_parts["correct"])  # fmt: skip
    torch.testing.assert_close(flat.advantages[:4], correct_only[:4], rtol=1e-2, atol=1e-2)
    assert correct_only[4:].abs().max() < 1e-6  # GRPO: a solved group trains nothing
    out = drpo(batch, kl_lambda=0.2, solved_advantage=0.5)
    solved = out.advantages[4:]
    assert (solved > 0).all() and solved[0] > solved[1] > solved[2]
    assert float(solved.mean()) == pytest.approx(0.5, rel=1e-5)
    assert out.stats[metrics.SOLVED_GROUPS] == 0.5
    assert drpo(batch, solved_advantage=0.0).advantages[4:].abs().max() == 0


def test_a_group_with_no_correct_completion_gets_grpos_zero():
    batch = groups([[0, 0, 0], [1, 0, 0]], [[1, 4, 8], [3, 2, 5]], WEIGHTS)
    out = drpo(batch)
    assert torch.isfinite(out.advantages).all() and out.advantages[:3].abs().max() < 1e-6


def test_the_drpo_preset_trains_and_reports_its_weights():
    cfg = small_config(method="drpo", schedule={"steps": 2})
    assert cfg.advantage.name == "drpo" and cfg.reward.weights == WEIGHTS
    reporter = MemoryReporter()
    assert Trainer(cfg, reporter).run() == "succeeded"
    rows = [r for r in reporter.metric_rows if metrics.POSITIVE_WEIGHT_MAX in r]
    assert len(rows) == 2
    for row in rows:
        assert row[metrics.POSITIVE_WEIGHT_MAX] >= 1.0 and row[metrics.CORRECT_NEGATIVE] == 0.0
        assert 0.0 <= row[metrics.SOLVED_GROUPS] <= 1.0
