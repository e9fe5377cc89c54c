"""Objectives and aggregations against plain-loop references."""

import json
import math
from pathlib import Path

import pytest
import torch

from workers.config import resolve
from workers.pipeline.objective import OBJECTIVES
from workers.pipeline.objective.base import aggregator, k3_kl
from workers.pipeline.stages import LossInputs

gen = torch.Generator().manual_seed(0)
OLD = -torch.rand(3, 5, generator=gen)  # (B, T)
NEW = OLD + 0.4 * (torch.rand(3, 5, generator=gen) - 0.5)
MASK = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.float)
ADV = torch.tensor([1.0, -0.5, 2.0])


def objective(name, **knobs):
    cfg = resolve({"objective": {"name": name, **knobs}})
    return OBJECTIVES.get(name)(cfg)


def inputs(new, how="sequence-mean", mask=MASK, adv=ADV):
    return LossInputs(new, OLD, adv, mask, aggregator(how, mask, max_new_tokens=5))


def test_token_clip_matches_a_plain_loop_with_asymmetric_clipping():
    out = objective("token-clip", clip_low=0.1, clip_high=0.15)(inputs(NEW, "token-mean"))
    total, count = 0.0, 0
    for b in range(3):
        for t in range(5):
            if MASK[b, t]:
                ratio = math.exp(NEW[b, t] - OLD[b, t])
                a = ADV[b].item()
                total += -min(ratio * a, min(max(ratio, 0.9), 1.15) * a)
                count += 1
    assert out.loss.item() == pytest.approx(total / count, rel=1e-5)


def test_token_clip_on_policy_gradient_is_the_policy_gradient():
    new = OLD.clone().requires_grad_(True)
    objective("token-clip")(inputs(new, "token-mean")).loss.backward()
    expected = -ADV[:, None] * MASK / MASK.sum()
    torch.testing.assert_close(new.grad, expected)


def test_clip_higher_lets_positive_advantages_rise_further():
    new = OLD + 0.2  # every ratio is e^0.2 = 1.22
    symmetric = objective("token-clip", clip_low=0.2, clip_high=0.2)(inputs(new, "token-mean", adv=ADV.abs()))
    higher = objective("token-clip", clip_low=0.2, clip_high=0.28)(inputs(new, "token-mean", adv=ADV.abs()))
    assert symmetric.stats["policy/clip_ratio/high"] == 1.0
    assert higher.stats["policy/clip_ratio/high"] == 0.0
    assert higher.loss < symmetric.loss


def test_sequence_clip_uses_one_ratio_per_sequence():
    """Moving log-probability between tokens of a sequence leaves GSPO's loss unchanged;
    the token-level loss notices."""
    shifted = NEW.clone()
    shifted[1, 0] += 0.3
    shifted[1, 1] -= 0.3
    gspo = objective("sequence-clip", clip_low=0.2, clip_high=0.2)
    token = objective("token-clip", clip_low=0.01, clip_high=0.01)
    assert gspo(inputs(shifted)).loss.item() == pytest.approx(gspo(inputs(NEW)).loss.item(), abs=1e-6)
    assert token(inputs(shifted)).loss.item() != pytest.approx(token(inputs(NEW)).loss.item(), abs=1e-6)


def test_sequence_clip_matches_a_plain_loop():
    low, high = 0.05, 0.08
    out = objective("sequence-clip", clip_low=low, clip_high=high)(inputs(NEW))
    losses = []
    for b in range(3):
        tokens = [t for t in range(5) if MASK[b, t]]
        ratio = math.exp(sum(NEW[b, t] - OLD[b, t] for t in tokens) / len(tokens))
        a = ADV[b].item()
        losses.append(-min(ratio * a, min(max(ratio, 1 - low), 1 + high) * a))
    assert out.loss.item() == pytest.approx(sum(losses) / 3, rel=1e-5)


def test_sequence_clip_gradient_is_shared_by_the_tokens_of_a_sequence():
    new = OLD.clone().requires_grad_(True)  # on-policy: ratio 1, nothing clipped
    objective("sequence-clip")(inputs(new)).loss.backward()
    for b in range(3):
        grads = new.grad[b][MASK[b] > 0]
        torch.testing.assert_close(grads, torch.full_like(grads, grads[0].item()))


VALUES = torch.arange(15, dtype=torch.float).view(3, 5)


def test_sequence_mean_aggregation():
    expected = ((0 + 1 + 2) / 3 + (5 + 6 + 7 + 8 + 9) / 5 + 10 / 1) / 3
    assert aggregator("sequence-mean", MASK, 5)(VALUES).item() == pytest.approx(expected)


def test_token_mean_aggregation():
    expected = (0 + 1 + 2 + 5 + 6 + 7 + 8 + 9 + 10) / 9
    assert aggregator("token-mean", MASK, 5)(VALUES).item() == pytest.approx(expected)


def test_constant_aggregation_divides_by_completions_times_max_length():
    expected = (0 + 1 + 2 + 5 + 6 + 7 + 8 + 9 + 10) / (3 * 5)
    assert aggregator("constant", MASK, 5)(VALUES).item() == pytest.approx(expected)


def test_rows_left_out_count_in_no_denominator():
    mask = MASK.clone()
    mask[1] = 0  # a pivot
    expected = ((0 + 1 + 2) / 3 + 10) / 2
    assert aggregator("sequence-mean", mask, 5)(VALUES).item() == pytest.approx(expected)


def test_sequence_sum_aggregation_sums_each_completion_then_averages_completions():
    expected = ((0 + 1 + 2) + (5 + 6 + 7 + 8 + 9) + 10) / 3
    assert aggregator("sequence-sum", MASK, 5)(VALUES).item() == pytest.approx(expected)


def test_rloo_gives_every_token_of_a_completion_the_weight_of_its_sequence_advantage():
    """RLOO treats a completion as one action: on-policy, d loss / d log pi(o_t) = -A_i / B for every
    token, however long the completion (no division by its length)."""
    cfg = resolve({"method": "rloo"})
    assert cfg.objective.aggregation == "sequence-sum"
    new = OLD.clone().requires_grad_(True)
    loss = OBJECTIVES.get(cfg.objective.name)(cfg)(inputs(new, cfg.objective.aggregation)).loss
    loss.backward()
    torch.testing.assert_close(new.grad, -ADV[:, None] * MASK / 3)


def test_k3_kl_stays_finite_when_the_policy_leaves_the_reference_far_behind():
    logprobs = torch.tensor([[0.0, -1.0, -100.0, -0.5]], requires_grad=True)
    ref = torch.tensor([[0.0, -1.2, -0.1, -200.0]])  # log-gaps 0, -0.2, +99.9, -199.5
    kl = k3_kl(logprobs, ref)
    assert torch.isfinite(kl).all() and (kl >= 0).all()
    assert kl[0, 0] == 0
    assert kl[0, 1].item() == pytest.approx(math.exp(-0.2) + 0.2 - 1, rel=1e-5)  # unclamped where small
    assert kl[0, 2] == 10 and kl[0, 3] == 10  # unclamped: exp(99.9) overflows float32 to inf
    kl.sum().backward()
    assert torch.isfinite(logprobs.grad).all()


def gradient(method, new):
    """d loss / d log pi of a preset's objective, at the new log-probabilities `new` (B, T)."""
    cfg = resolve({"method": method})
    new = new.clone().requires_grad_(True)
    OBJECTIVES.get(cfg.objective.name)(cfg)(inputs(new, cfg.objective.aggregation)).loss.backward()
    return new.grad


def test_gspo_is_grpo_on_policy_and_differs_once_the_batch_is_reused():
    """On-policy (one pass, one minibatch: pi = pi_old) GSPO's gradient is GRPO's, -A_i / (|y_i| B) on every token;
    after an update (a second minibatch or pass: pi != pi_old) the sequence ratio and its clipping part them."""
    torch.testing.assert_close(gradient("gspo", OLD), gradient("grpo", OLD))
    after_an_update = OLD + 0.01 * (torch.arange(15, dtype=torch.float).view(3, 5) % 4 - 1.5)
    assert not torch.allclose(gradient("gspo", after_an_update), gradient("grpo", after_an_update), atol=1e-4)


PINNED = Path(__file__).with_name("data") / "preset_streams.json"


def test_gspo_and_grpo_tiny_runs_agree_on_policy_and_part_when_a_batch_is_used_twice():
    """The pinned tiny runs (tests/offline/engine/test_pinned_streams.py): on-policy the two presets train the same
    model to rounding (their clip statistics differ only by what they count); with two passes of two
    minibatches the first step's gradient already differs."""
    streams = json.loads(PINNED.read_text())["streams"]
    ratio_stats = {"policy/clip_ratio/low", "policy/clip_ratio/high", "policy/sequence_ratio_mean"}
    for grpo, gspo in zip(streams["grpo / on-policy"], streams["gspo / on-policy"]):
        for name in set(grpo) - ratio_stats:
            assert gspo[name] == pytest.approx(grpo[name], rel=1e-5, abs=1e-7), name
    grpo, gspo = streams["grpo / two passes of two minibatches"][1], streams["gspo / two passes of two minibatches"][1]
    assert gspo["optim/grad_norm"] != pytest.approx(grpo["optim/grad_norm"], rel=0.05)
