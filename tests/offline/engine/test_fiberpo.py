"""FiberPO's two-level gate (objective 'fiber-gate') on constructed log-probabilities, against a plain loop."""

import math

import pytest
import torch

from tests.conftest import small_config
from workers import metrics
from workers.config import resolve
from workers.pipeline.objective import OBJECTIVES
from workers.pipeline.objective.base import aggregator
from workers.pipeline.stages import LossInputs
from workers.reporting import MemoryReporter
from workers.schedule_checks import warnings
from workers.training.trainer import Trainer

WIDE = {"clip_low": 0.9, "clip_high": 10.0}  # a token range nothing leaves
SEQUENCE_WIDE = {"sequence_clip_low": 0.9, "sequence_clip_high": 1.0}  # a sequence range nothing here leaves


def objective(name="fiber-gate", **knobs):
    cfg = resolve({"objective": {"name": name, **knobs}})
    return OBJECTIVES.get(name)(cfg)


def loss_inputs(new, old, mask, adv, how="sequence-mean"):
    return LossInputs(new, old, adv, mask, aggregator(how, mask, mask.shape[1]))


def gradient(component, log_ratio, mask, adv, how="sequence-mean"):
    """(loss, d loss / d log pi, stats) at log pi = old + log_ratio."""
    old = torch.full_like(log_ratio, -1.0)
    new = (old + log_ratio).requires_grad_(True)
    out = component(loss_inputs(new, old, mask, adv, how))
    out.loss.backward()
    return out.loss.item(), new.grad, out.stats


def reference(log_ratio, mask, adv, sequence_range=(3e-4, 4e-4), token_range=(0.2, 0.2)):
    """A plain loop: each token's loss value and its gradient under sequence-mean aggregation."""
    rows, width = log_ratio.shape
    in_loss = [b for b in range(rows) if mask[b].sum() > 0]
    loss, grad = 0.0, torch.zeros(rows, width)
    for b in in_loss:
        tokens = [t for t in range(width) if mask[b, t]]
        log_s = sum(float(log_ratio[b, t]) for t in tokens) / len(tokens)
        for t in tokens:
            a, s, r = float(adv[b]), math.exp(log_s), math.exp(float(log_ratio[b, t]) - log_s)
            s_out = (a > 0 and s > 1 + sequence_range[1]) or (a < 0 and s < 1 - sequence_range[0])
            r_out = (a > 0 and r > 1 + token_range[1]) or (a < 0 and r < 1 - token_range[0])
            s_value = min(max(s, 1 - sequence_range[0]), 1 + sequence_range[1]) if s_out else s
            r_value = min(max(r, 1 - token_range[0]), 1 + token_range[1]) if r_out else r
            loss += -a * s_value * r_value / len(tokens) / len(in_loss)
            if not (s_out or r_out):
                grad[b, t] = -a * s * r / len(tokens) / len(in_loss)
    return loss, grad


def test_on_policy_it_is_the_token_clip_in_loss_and_gradient():
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 1]])
    for adv in (torch.tensor([1.0, -0.5, 0.25]), torch.tensor([[1.0, -1, 2, 0], [0.5, 0.5, -1, 1], [-2, 1, 1, 1]])):
        fiber = gradient(objective(), torch.zeros(3, 4), mask, adv)
        token = gradient(objective("token-clip"), torch.zeros(3, 4), mask, adv)
        assert fiber[0] == pytest.approx(token[0])
        torch.testing.assert_close(fiber[1], token[1])
        assert fiber[2][metrics.SEQUENCE_GATED] == fiber[2][metrics.RESIDUAL_GATED] == 0.0
        assert fiber[2][metrics.CLIP_RATIO_LOW] == fiber[2][metrics.CLIP_RATIO_HIGH] == 0.0


def test_a_sequence_whose_normalised_ratio_leaves_its_range_is_gated_as_a_whole():
    """Row 0's tokens drift apart unevenly, but their mean log-ratio (0.01) puts s above 1 + 4e-4: every token
    of it loses its gradient, including those whose own ratio is below 1. Row 1, inside the range, keeps its
    token-clip gradient; row 2 drifts as far but down with A > 0, the side the gate leaves open."""
    log_ratio = torch.tensor(
        [[0.05, -0.02, 0.01, -0.00], [0.0002, -0.0001, 0.0, -0.0001], [-0.01, -0.01, -0.01, -0.01]]
    )
    mask, adv = torch.ones(3, 4), torch.tensor([1.0, 1.0, 1.0])
    loss, grad, stats = gradient(objective(), log_ratio, mask, adv)
    assert (grad[0] == 0).all()
    assert (grad[1] != 0).all() and (grad[2] != 0).all()
    want_loss, want_grad = reference(log_ratio, mask, adv)
    torch.testing.assert_close(grad, want_grad)
    assert loss == pytest.approx(want_loss, rel=1e-6)
    assert stats[metrics.SEQUENCE_GATED] == pytest.approx(1 / 3)
    assert stats[metrics.CLIP_RATIO_HIGH] == pytest.approx(4 / 12) and stats[metrics.CLIP_RATIO_LOW] == 0.0
    assert stats[metrics.SEQUENCE_RATIO_MEAN] == pytest.approx(float(log_ratio.mean(-1).exp().mean()), rel=1e-6)
    # the same drift with A < 0: row 2 (s below 1 - 3e-4) is gated as a whole, row 0 is not
    _, grad, stats = gradient(objective(), log_ratio, mask, -adv)
    assert (grad[2] == 0).all() and (grad[0] != 0).all() and (grad[1] != 0).all()
    assert stats[metrics.CLIP_RATIO_LOW] == pytest.approx(4 / 12) and stats[metrics.CLIP_RATIO_HIGH] == 0.0


def test_a_token_whose_residual_leaves_its_range_is_gated_alone():
    """The residual judges a token against its own sequence, not against 1 (the sequence range is opened wide).

    Row 0: token 0's ratio is 1, but its sequence's ratio is exp(-0.225), so its residual exp(0.225) > 1.2 is
    gated (A > 0) while its siblings keep their gradient; the token clip lets token 0 through. Row 1 drifts up
    nearly evenly (ratios 1.35 to 1.65): no residual leaves its range, where the token clip gates all four."""
    log_ratio = torch.tensor([[0.0, -0.3, -0.3, -0.3], [0.5, 0.3, 0.3, 0.3]])
    mask, adv = torch.ones(2, 4), torch.tensor([1.0, 1.0])
    _, grad, stats = gradient(objective(**SEQUENCE_WIDE), log_ratio, mask, adv)
    assert grad[0, 0] == 0 and (grad[0, 1:] != 0).all() and (grad[1] != 0).all()
    torch.testing.assert_close(grad, reference(log_ratio, mask, adv, sequence_range=(0.9, 1.0))[1])
    assert stats[metrics.RESIDUAL_GATED] == pytest.approx(1 / 8) and stats[metrics.SEQUENCE_GATED] == 0.0
    assert stats[metrics.CLIP_RATIO_HIGH] == pytest.approx(1 / 8)
    _, token_grad, _ = gradient(objective("token-clip"), log_ratio, mask, adv)
    assert token_grad[0, 0] != 0 and (token_grad[1] == 0).all()


def test_the_gradient_and_value_match_a_plain_loop_on_random_ratios_with_padding():
    gen = torch.Generator().manual_seed(7)
    log_ratio = 0.3 * torch.randn(6, 5, generator=gen)
    log_ratio[3] = 0.001 * torch.randn(5, generator=gen)  # near on-policy: the sequence gate may stay open
    mask = torch.tensor([[1.0, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0],
                         [1, 1, 0, 1, 1]])  # fmt: skip
    log_ratio[1, 3:] = 9.0  # padding: must not move s
    adv = torch.tensor([1.0, -1.0, 0.5, 2.0, 1.0, -0.25])
    for knobs, ranges in (({}, {}), (SEQUENCE_WIDE, {"sequence_range": (0.9, 1.0)})):
        loss, grad, _ = gradient(objective(**knobs), log_ratio, mask, adv)
        want_loss, want_grad = reference(log_ratio, mask, adv, **ranges)
        torch.testing.assert_close(grad, want_grad)
        assert loss == pytest.approx(want_loss, rel=1e-5)


def test_with_both_ranges_wide_nothing_is_gated_and_the_gradient_is_the_unclipped_surrogates():
    log_ratio = 0.4 * torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    mask, adv = torch.ones(3, 4), torch.tensor([1.0, -1.0, 0.5])
    _, grad, stats = gradient(objective(**SEQUENCE_WIDE, **WIDE), log_ratio, mask, adv)
    torch.testing.assert_close(grad, -adv[:, None] * log_ratio.exp() / 4 / 3)
    assert stats[metrics.SEQUENCE_GATED] == stats[metrics.RESIDUAL_GATED] == 0.0


def test_the_preset_brings_an_off_policy_schedule_and_is_warned_of_without_one():
    cfg = resolve({"method": "fiberpo"})
    assert cfg.objective.name == "fiber-gate" and cfg.schedule.minibatches == 4 and not warnings(cfg)
    assert (cfg.objective.sequence_clip_low, cfg.objective.sequence_clip_high) == (3e-4, 4e-4)
    found = warnings(resolve({"method": "fiberpo", "schedule": {"minibatches": 1}}))
    assert found[0].startswith("objective 'fiber-gate': cannot act: one pass of one minibatch")


def test_a_tiny_run_reports_both_gates():
    # the preset's 4 minibatches (small_config's one would leave every update on-policy, its ratios exactly 1)
    cfg = small_config(method="fiberpo", schedule={"steps": 3, "minibatches": 4})
    trainer = Trainer(cfg, MemoryReporter())
    trainer.run()
    rows = [row for row in trainer.reporter.metric_rows if metrics.ESS in row]
    for name in (metrics.SEQUENCE_GATED, metrics.RESIDUAL_GATED, metrics.CLIP_RATIO_HIGH, metrics.CLIP_RATIO_LOW):
        assert all(0 <= row[name] <= 1 for row in rows), name
    # 3 of every step's 4 minibatch updates are off-policy: the policy moved after the first (Adam's momentum
    # moves it on in a step whose groups all agree), so the weights spread and the ESS falls below 1
    assert len(rows) == 3 and all(row[metrics.OPTIM_STEPS] == 4 for row in rows)
    assert all(row[metrics.ESS] < 1 for row in rows), [(r["step"], r[metrics.ESS]) for r in rows]
