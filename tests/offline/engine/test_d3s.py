"""D³S: the max-variance subset of each group, the top |A| x entropy tokens, a schedule that relaxes."""

import itertools

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.advantage.d3s.component import max_variance_subset, relaxed
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


@pytest.mark.parametrize("seed", range(20))
def test_the_subset_has_the_largest_variance_of_all_subsets_of_its_size(seed):
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(7, generator=g).round(decimals=1)
    for k in range(2, 7):
        best = max(float(values[list(c)].var(unbiased=False)) for c in itertools.combinations(range(7), k))
        picked = max_variance_subset(values, k)
        assert len(picked) == k and float(values[picked].var(unbiased=False)) == pytest.approx(best)


def test_a_binary_group_keeps_a_balanced_pair():
    values = torch.tensor([1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0])
    picked = max_variance_subset(values, 4)
    assert sorted(values[picked].tolist()) == [-1.0, -1.0, 1.0, 1.0]


def test_the_schedule_relaxes_to_keep_everything():
    assert relaxed(0.5, 0, 100) == 0.5 and relaxed(0.5, 50, 100) == 0.75
    assert relaxed(0.5, 100, 100) == 1.0 and relaxed(0.5, 500, 100) == 1.0


def test_tokens_with_the_largest_advantage_times_entropy_are_kept():
    cfg = resolve({"method": "d3s", "advantage": {"sample_share": 1.0, "token_share": 0.5}})
    d3s = ADVANTAGES.get("d3s")(cfg)
    batch = scored([2])
    batch.rewards = torch.tensor([1.0, 0.0])
    batch.mask = torch.ones(2, 4)
    batch.logprobs = -torch.tensor([[0.1, 2.0, 0.2, 3.0], [1.0, 0.1, 0.5, 0.3]])  # surprisal = entropy estimate
    out = d3s(batch)
    assert out.in_loss.all()
    # |A| is equal in a group of two, so the 4 most surprising tokens of the 8 are kept
    assert out.token_mask.tolist() == [[False, True, False, True], [True, False, True, False]]
    assert out.stats["pipeline/advantage/kept_tokens"] == 0.5


def test_the_down_sampled_rows_stay_in_the_baseline():
    cfg = resolve({"method": "d3s", "advantage": {"sample_share": 0.5, "token_share": 1.0}})
    d3s, grpo = ADVANTAGES.get("d3s")(cfg), ADVANTAGES.get("group-mean")(cfg)
    batch = scored([4, 4])
    batch.rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    batch.mask = torch.ones(8, 3)
    out = d3s(batch)
    assert torch.equal(out.advantages, grpo(batch).advantages)  # the baseline is the whole group's
    assert out.in_loss.view(2, 4).sum(-1).tolist() == [2, 2]
    kept = batch.rewards[out.in_loss].view(2, 2).sort(-1).values
    assert kept.tolist() == [[0.0, 1.0], [0.0, 1.0]]  # each kept pair is one right and one wrong


def test_a_d3s_run_trains_on_fewer_samples_and_tokens_then_relaxes():
    cfg = small_config(method="d3s", advantage={"relax_steps": 3}, schedule={"steps": 4})
    reporter = MemoryReporter()
    Trainer(cfg, reporter).run()
    rows = [r for r in reporter.metric_rows if "pipeline/advantage/kept_samples" in r]
    assert rows[0]["pipeline/advantage/kept_samples"] == 0.5
    assert rows[0]["pipeline/advantage/kept_tokens"] < 0.5
    assert rows[-1]["pipeline/advantage/kept_samples"] == 1.0 and rows[-1]["pipeline/advantage/kept_tokens"] == 1.0
    assert any(
        "down-sampled (D³S): left out of the loss" in s["stages"].get("advantage", "") for s in reporter.sample_rows
    )
