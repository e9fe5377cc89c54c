"""Rows an older policy sampled keep their correction: the decoupled form, whatever pi_old's source.

A replayed row, an APRIL row continued from an older prefix and an asynchronous batch carry the version and
the log-probabilities of the policy that sampled them. The objective clips them against the proximal policy
(the learner before the step's update) and weighs each token by min(pi_prox / pi_behaviour, C). That weight must
be the same whether the learner recomputes pi_old for every row (objective.old_logprobs = recompute: bf16,
vLLM and Ray runs) or carries the sampler's numbers (sampler: an `hf` float32 run). Before, a recomputing run
gave such a row pi_old from the current weights and no weight at all: its ratio started at 1, and nothing saw
its staleness.
"""

from __future__ import annotations

import math
from functools import cache

import pytest
import torch

from tests.conftest import small_config
from workers import metrics as metric
from workers.config import resolve
from workers.pipeline.objective import OBJECTIVES
from workers.pipeline.objective.base import aggregator
from workers.pipeline.stages import LossInputs
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer

STALE_SOURCES = {
    # compensation rows of steps 1 and 2 replayed at step 3: two versions and one version old
    "replay": {"method": "rorecomp", "replay": {"compensation_every": 3}, "schedule": {"steps": 3}},
    # groups left unfinished continue in a later step: their rows began two or more versions ago
    "april": {
        "method": "april",
        "model": {"warmup_steps": 0},  # long rollouts, so groups stay unfinished
        "reward": {"weights": {"correct": 1.0, "length": 0.5}},  # the untrained policy's rows still differ
        "rollout": {"max_new_tokens": 12},
        "generate": {"oversample": 3.0, "check_every": 1},
        "schedule": {"steps": 3},
    },
    # the asynchronous trainer: from step 3 each batch was sampled two versions before the learner's
    "max_staleness 2": {"schedule": {"steps": 4, "max_staleness": 2}},
}


class WeightSpy:
    """Wraps a run's objective: records, per optimizer step, the stale rows' staleness and their token weights."""

    def __init__(self, objective):
        self.objective, self.seen = objective, []

    def __getattr__(self, name):
        return getattr(self.objective, name)

    def __call__(self, x: LossInputs):
        weight, _ = self.objective.behaviour_weights(x)
        stale = x.stale
        if bool(stale.any()):
            weights = weight[stale] if weight is not None else torch.ones_like(x.mask[stale])
            self.seen.append((x.staleness[stale.cpu()].clone(), (weights * x.mask[stale]).detach().clone()))
        return self.objective(x)


@cache
def stale_weights(source: str, old_logprobs: str):
    sections = {k: v for k, v in STALE_SOURCES[source].items() if k != "method"}
    cfg = small_config(method=STALE_SOURCES[source]["method"] if "method" in STALE_SOURCES[source] else "grpo",
                       objective={"old_logprobs": old_logprobs}, **sections)  # fmt: skip
    trainer = Trainer(cfg, MemoryReporter())
    spy = WeightSpy(trainer.stages.objective)
    trainer.stages.objective = spy
    assert trainer.run() == "succeeded"
    return spy.seen, trainer.reporter.metric_rows


@pytest.mark.parametrize("source", sorted(STALE_SOURCES))
def test_a_stale_row_gets_the_same_weight_whether_pi_old_is_recomputed_or_carried(source):
    recomputed, rows = stale_weights(source, "recompute")
    carried, _ = stale_weights(source, "sampler")
    assert recomputed, f"{source}: no optimizer step trained a stale row"
    assert len(recomputed) == len(carried)
    assert max(int(ages.max()) for ages, _ in recomputed) >= 2  # rows sampled two versions ago among them
    for (ages_r, weights_r), (ages_c, weights_c) in zip(recomputed, carried):
        assert torch.equal(ages_r, ages_c)
        torch.testing.assert_close(weights_r, weights_c, rtol=1e-4, atol=1e-6)
    moved = torch.cat([w.flatten() for _, w in recomputed])
    assert bool(((moved != 0) & ((moved - 1).abs() > 1e-3)).any())  # the weights are not all 1: they correct
    assert max(r.get(metric.STALE_ROWS, 0.0) for r in rows) > 0


def decoupled_inputs(staleness):
    """Two rows of three tokens; the second token of each is twice as likely under pi_prox as under pi_behaviour,
    the third 10 times (over the bound of 5)."""
    behaviour = torch.full((2, 3), -2.0)
    proximal = behaviour + torch.tensor([[0.0, math.log(2), math.log(10)]] * 2)
    current = proximal + 0.05  # the policy has moved a little since pi_prox
    mask = torch.ones(2, 3)
    return LossInputs(current, proximal, torch.tensor([1.0, -0.5]), mask, aggregator("token-mean", mask, 3),
                      sampler_logprobs=behaviour, staleness=torch.tensor(staleness))  # fmt: skip


@pytest.mark.parametrize("name", ["token-clip", "min-prefix-ratio", "variance-controlled", "fiber-gate"])
def test_every_token_objective_weighs_a_stale_rows_tokens_by_the_bounded_proximal_behaviour_ratio(name):
    objective = OBJECTIVES.get(name)(resolve({"objective": {"name": name}}))
    weight, stats = objective.behaviour_weights(decoupled_inputs([2, 0]))
    torch.testing.assert_close(weight, torch.tensor([[1.0, 2.0, 5.0], [1.0, 1.0, 1.0]]))
    assert stats[metric.STALE_IS_OVER_BOUND] == pytest.approx(1 / 3)
    assert objective.behaviour_weights(decoupled_inputs([0, 0]))[0] is None  # fresh rows: no weight at all


def test_the_token_clips_loss_on_a_stale_row_is_its_proximal_surrogate_times_the_weight():
    x = decoupled_inputs([1, 1])
    out = OBJECTIVES.get("token-clip")(resolve({}))(x)
    ratio = math.exp(0.05)  # pi / pi_prox on every token: inside the clip
    expected = sum(-ratio * a * w for a in (1.0, -0.5) for w in (1.0, 2.0, 5.0)) / 6
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)
    assert out.stats[metric.STALE_IS_WEIGHT_MEAN] == pytest.approx(8 / 3)


def test_gspo_weighs_a_stale_sequence_by_its_length_normalised_behaviour_ratio():
    objective = OBJECTIVES.get("sequence-clip")(resolve({"method": "gspo"}))
    weight, _ = objective.behaviour_weights(decoupled_inputs([3, 0]), torch.full((2,), 3.0))
    torch.testing.assert_close(weight, torch.tensor([math.exp((math.log(2) + math.log(10)) / 3), 1.0]))


def test_the_bound_is_a_knob_and_warns_where_no_row_is_ever_stale():
    from workers.schedule_checks import warnings

    assert any("objective.behaviour_is_bound" in w for w in warnings(resolve({"objective": {"behaviour_is_bound": 2}})))
    replaying = resolve({"method": "rorecomp", "objective": {"behaviour_is_bound": 2}})
    assert not any("behaviour_is_bound" in w for w in warnings(replaying))
    assert not any("behaviour_is_bound" in w for w in warnings(resolve({})))  # the default is never flagged
