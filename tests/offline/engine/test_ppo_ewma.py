"""PPO-EWMA, the Missing-Old-Logits repair: the proximal policy is a bias-corrected EWMA of the policy's weights."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import small_config
from workers import metrics as metric
from workers.config import resolve
from workers.pipeline.objective import OBJECTIVES
from workers.pipeline.objective.base import aggregator
from workers.pipeline.objective.ewma_proximal.component import EwmaWeights
from workers.pipeline.stages import LossInputs
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def test_the_average_is_the_bias_corrected_ewma_of_the_weights_seen():
    decay = 0.7
    net = torch.nn.Linear(3, 2)
    seen = [net.weight.detach().clone()]  # w_0: the average starts as the network
    average = EwmaWeights(decay)
    average.network(net)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        with torch.no_grad():
            net.weight.add_(torch.randn(2, 3, generator=gen))
        seen.append(net.weight.detach().clone())
        average.advance(net)
    k = len(seen) - 1  # by hand: sum_i decay^(k - i) w_i / sum_i decay^(k - i), i = 0 .. k
    factors = [decay ** (k - i) for i in range(k + 1)]
    by_hand = sum(f * w for f, w in zip(factors, seen)) / sum(factors)
    torch.testing.assert_close(average.network(net).weight, by_hand)
    assert not average.network(net).weight.requires_grad


def test_decay_zero_makes_the_average_the_network_after_each_step():
    net = torch.nn.Linear(2, 2)
    average = EwmaWeights(0.0)
    with torch.no_grad():
        net.weight.mul_(3)
    average.advance(net)
    torch.testing.assert_close(average.network(net).weight, net.weight)


def test_a_checkpointed_average_comes_back_as_it_was():
    import pickle

    net, average = torch.nn.Linear(2, 2), EwmaWeights(0.5)
    with torch.no_grad():
        net.weight.add_(1.0)
    average.advance(net)
    restored = pickle.loads(pickle.dumps(average))
    assert restored.average is None and restored.total == average.total
    torch.testing.assert_close(restored.network(torch.nn.Linear(2, 2)).weight, average.network(net).weight)


def test_every_row_fresh_or_stale_is_weighted_by_the_bounded_proximal_over_behaviour_ratio():
    behaviour = torch.full((2, 3), -2.0)
    proximal = behaviour + torch.tensor([[0.0, math.log(2), math.log(10)], [math.log(0.5), 0.0, 0.0]])
    mask = torch.ones(2, 3)
    x = LossInputs(proximal, proximal, torch.tensor([1.0, -1.0]), mask, aggregator("token-mean", mask, 3),
                   sampler_logprobs=behaviour, staleness=torch.tensor([0, 0]))  # fmt: skip
    objective = OBJECTIVES.get("ewma-proximal")(resolve({"method": "ppo-ewma"}))
    weight, _ = objective.behaviour_weights(x)
    torch.testing.assert_close(weight, torch.tensor([[1.0, 2.0, 5.0], [0.5, 1.0, 1.0]]))
    # the token clip leaves fresh rows alone: their pi_prox is the policy that sampled them
    assert OBJECTIVES.get("token-clip")(resolve({})).behaviour_weights(x)[0] is None


@pytest.mark.parametrize("max_staleness", [None, 2])
def test_a_ppo_ewma_run_clips_against_the_lagging_average(max_staleness):
    cfg = small_config(method="ppo-ewma", schedule={"steps": 4, "max_staleness": max_staleness})
    reporter = MemoryReporter()
    trainer = Trainer(cfg, reporter)
    assert trainer.run() == "succeeded"
    rows = reporter.metric_rows
    assert rows[0][metric.PROXIMAL_LAG] == pytest.approx(0.0, abs=1e-6)  # the average starts as the policy
    assert all(r[metric.PROXIMAL_LAG] > 0 for r in rows[1:])  # and lags it once it has moved
    assert any(abs(r[metric.TOKEN_RATIO_MEAN] - 1) > 1e-5 for r in rows[1:])  # pi / pi_prox is not 1
    assert all(math.isfinite(r[metric.LOSS]) for r in rows)
    assert trainer.stages.objective.proximal.total > 1  # it followed every optimizer step
