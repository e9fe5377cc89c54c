"""GDPO: each reward function normalised within its group on its own, so distinct reward combinations stay distinct."""

import statistics

import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer

WEIGHTS = {"correct": 1.0, "format": 1.0}


def with_parts(sizes, parts: dict[str, list[float]], weights=WEIGHTS):
    """A scored batch whose reward parts are `parts` and whose reward is their weighted sum, as the trainer scores."""
    batch = scored(sizes)
    batch.reward_parts = {name: torch.tensor(values) for name, values in parts.items()}
    batch.rewards = sum(weights[name] * batch.reward_parts[name] for name in weights)
    return batch


def estimate(name, batch, weights=WEIGHTS, **knobs):
    cfg = resolve({"advantage": {"name": name, **knobs}, "reward": {"weights": weights}})
    return ADVANTAGES.get(name)(cfg)(batch)


# parts (correct, format) of one group of four: samples 0 and 1 are (1, 0) and (0, 1), the same sum 1
ONE_GROUP = {"correct": [1.0, 0.0, 1.0, 1.0], "format": [0.0, 1.0, 1.0, 0.0]}


def test_two_rollouts_with_the_same_sum_share_grpos_advantage_but_not_gdpos():
    batch = with_parts([4], ONE_GROUP)
    grpo = estimate("group-mean", batch).advantages
    gdpo = estimate("gdpo", batch).advantages
    assert grpo[0] == grpo[1] and grpo[0] == grpo[3]  # three rollouts of sum 1, one advantage
    assert abs(float(gdpo[0] - gdpo[1])) > 0.1
    assert gdpo[0] == gdpo[3]  # the same parts, the same advantage
    assert torch.equal(torch.sign(gdpo), torch.tensor([-1.0, -1.0, 1.0, -1.0]))  # (1, 1) the only one above


def loop_gdpo(sizes, parts, weights, eps=1e-4, batch_norm=True):
    """The paper's recipe as plain Python: per reward and group (r - mean) / (std + eps), weighted sum, batch norm."""
    summed = [0.0] * sum(sizes)
    for name, weight in weights.items():
        start = 0
        for size in sizes:
            group = parts[name][start : start + size]
            mean, std = sum(group) / size, statistics.stdev(group)
            for i, r in enumerate(group):
                summed[start + i] += weight * (r - mean) / (std + eps)
            start += size
    if not batch_norm:
        return summed
    mean, std = sum(summed) / len(summed), statistics.stdev(summed)
    return [(s - mean) / (std + eps) for s in summed]


def test_gdpo_matches_a_plain_loop_on_ragged_groups_with_weights():
    gen = torch.Generator().manual_seed(3)
    sizes = [2, 5, 3, 5]
    parts = {
        "correct": torch.randint(0, 2, (15,), generator=gen).float().tolist(),
        "format": torch.randint(0, 2, (15,), generator=gen).float().tolist(),
        "length": (-torch.rand(15, generator=gen)).tolist(),
    }
    weights = {"correct": 1.0, "format": 0.5, "length": -2.0}
    batch = with_parts(sizes, parts, weights)
    for batch_norm in (True, False):
        out = estimate("gdpo", batch, weights, batch_norm=batch_norm)
        expected = torch.tensor(loop_gdpo(sizes, parts, weights, batch_norm=batch_norm))
        torch.testing.assert_close(out.advantages, expected, rtol=1e-5, atol=1e-5)
        assert out.in_loss.all()


def test_with_one_reward_function_and_no_batch_norm_gdpo_is_grpo():
    batch = with_parts([4, 4], {"correct": [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]}, {"correct": 1.0})
    grpo = estimate("group-mean", batch, {"correct": 1.0}).advantages
    gdpo = estimate("gdpo", batch, {"correct": 1.0}, batch_norm=False).advantages
    torch.testing.assert_close(gdpo, grpo)


def test_a_part_constant_within_its_group_adds_nothing_and_the_counts_are_reported():
    batch = with_parts([4], {"correct": ONE_GROUP["correct"], "format": [1.0, 1.0, 1.0, 1.0]})
    out = estimate("gdpo", batch, batch_norm=False)
    alone = estimate("gdpo", with_parts([4], {"correct": ONE_GROUP["correct"]}, {"correct": 1.0}), {"correct": 1.0},
                     batch_norm=False)  # fmt: skip
    torch.testing.assert_close(out.advantages, alone.advantages)
    spread = estimate("gdpo", with_parts([4], ONE_GROUP))
    assert spread.stats["pipeline/advantage/distinct_values"] == 3.0  # (1,0) twice, (0,1), (1,1)
    assert spread.stats["pipeline/advantage/distinct_reward_sums"] == 2.0  # sums 1 and 2


def test_the_gdpo_preset_trains_on_three_reward_functions_and_reports_its_counts():
    cfg = small_config(method="gdpo", schedule={"steps": 2})
    assert set(cfg.reward.weights) == {"correct", "format", "length"}
    reporter = MemoryReporter()
    assert Trainer(cfg, reporter).run() == "succeeded"
    rows = [r for r in reporter.metric_rows if "pipeline/advantage/distinct_values" in r]
    assert len(rows) == 2
    for row in rows:
        assert {"reward/correct/mean", "reward/format/mean", "reward/length/mean"} <= set(row)
        assert 1 <= row["pipeline/advantage/distinct_values"] <= cfg.rollout.group_size
