"""ACE: GRPO's negative advantages scaled by 1 + alpha softplus(c), c = log pi_theta(y|x) - log pi_ref(y|x)."""

import math

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.errors import ConfigError
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.advantage.ace.component import CONFIDENCE_SHIFT, OVERCONFIDENT_ERRORS, PENALTY_FACTOR
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def ace(**knobs):
    return ADVANTAGES.get("ace")(resolve({"advantage": {"name": "ace", **knobs}}))


def grpo(batch):
    return ADVANTAGES.get("group-mean")(resolve({}))(batch).advantages


def with_shifts(sizes, rewards, shifts, lengths=None, seed=0):
    """A scored batch whose sample i has rewards[i] and a confidence shift c_i = shifts[i], spread over its tokens.

    The padding beyond each completion holds values that would change c if they were counted."""
    batch = scored(sizes, seed=seed)
    n = sum(sizes)
    lengths = lengths or [3] * n
    width = max(lengths)
    batch.rewards = torch.tensor(rewards, dtype=torch.float)
    batch.correct = batch.rewards > 0
    batch.mask = torch.tensor([[1.0] * length + [0.0] * (width - length) for length in lengths])
    batch.tokens = torch.zeros(n, width, dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    batch.ref_logprobs = -torch.rand(n, width, generator=gen) * batch.mask
    gap = torch.tensor(shifts, dtype=torch.float)[:, None] / torch.tensor(lengths, dtype=torch.float)[:, None]
    batch.logprobs = torch.where(batch.mask > 0, batch.ref_logprobs + gap, torch.full_like(gap.expand(n, width), -7.0))
    return batch


def test_negative_advantages_scale_by_exactly_one_plus_alpha_softplus_c_and_positive_ones_are_untouched():
    # two right, two wrong: the wrong ones have A < 0; c differs in sign and size, and lengths differ
    shifts = [2.0, -1.5, 0.7, -3.0]
    batch = with_shifts([4], [1, 1, 0, 0], shifts, lengths=[3, 1, 2, 4])
    base = grpo(batch)
    assert (base[:2] > 0).all() and (base[2:] < 0).all()
    for alpha in (1.0, 0.5, 3.0):
        out = ace(alpha=alpha)(batch)
        expected = base.clone()
        expected[2:] *= 1 + alpha * F.softplus(torch.tensor(shifts[2:]))
        torch.testing.assert_close(out.advantages, expected)
        assert torch.equal(out.advantages[:2], base[:2])  # positive: exactly GRPO's, whatever c
        assert torch.equal(torch.sign(out.advantages), torch.sign(base))  # no sign changes
        assert out.in_loss.all()


def test_zero_advantages_and_all_wrong_groups_are_left_as_they_are():
    batch = with_shifts([3, 3], [0, 0, 0, 1, 1, 1], [5.0, 2.0, -1.0, 4.0, 0.0, 3.0])
    out = ace()(batch)
    assert torch.equal(out.advantages, torch.zeros(6))
    assert out.stats[PENALTY_FACTOR] == 1.0 and out.stats[OVERCONFIDENT_ERRORS] == 0.0


def test_the_penalty_rises_monotonically_with_the_confidence_shift():
    shifts = [-4.0, -1.0, 0.0, 0.5, 2.0, 6.0]
    batch = with_shifts([7], [1] + [0] * 6, [0.0] + shifts)  # the six wrong samples share one GRPO advantage
    out = ace()(batch).advantages[1:]
    assert (out < 0).all()
    assert all(a > b for a, b in zip(out.tolist(), out[1:].tolist()))  # larger c: pushed down harder
    factor = out / grpo(batch)[1:]
    assert factor.min() >= 1
    torch.testing.assert_close(factor[2], torch.tensor(1 + math.log(2)))  # c = 0: softplus(0) = ln 2


def test_alpha_zero_is_grpo_on_a_ragged_batch():
    sizes = [2, 5, 3]
    gen = torch.Generator().manual_seed(3)
    rewards = torch.randint(0, 2, (10,), generator=gen).float().tolist()
    batch = with_shifts(sizes, rewards, torch.randn(10, generator=gen).tolist())
    torch.testing.assert_close(ace(alpha=0.0)(batch).advantages, grpo(batch), rtol=0, atol=0)


def test_the_confidence_shift_counts_only_the_completion_tokens_and_is_reported():
    shifts = [1.0, -2.0, 3.0, 0.5]
    batch = with_shifts([4], [1, 0, 0, 0], shifts, lengths=[4, 2, 1, 3])  # padding holds -7, not counted
    stats = ace()(batch).stats
    assert stats[CONFIDENCE_SHIFT] == pytest.approx(sum(shifts) / 4, abs=1e-6)
    assert stats[OVERCONFIDENT_ERRORS] == pytest.approx(2 / 3)  # wrong: c = -2, 3, 0.5
    expected = sum(1 + F.softplus(torch.tensor(c)).item() for c in shifts[1:]) / 3
    assert stats[PENALTY_FACTOR] == pytest.approx(expected, rel=1e-6)


def test_a_batch_without_the_references_log_probabilities_is_refused():
    batch = with_shifts([4], [1, 0, 0, 1], [0.0] * 4)
    batch.ref_logprobs = None
    with pytest.raises(ValueError, match=r"ace needs the reference policy's log-probabilities.*ref_logprobs"):
        ace()(batch)


def test_the_preset_is_grpo_with_the_ace_advantage_and_declares_that_it_needs_the_reference():
    cfg, base = resolve({"method": "ace"}), resolve({"method": "grpo"})
    assert cfg.advantage.name == "ace" and cfg.advantage.alpha == 1.0
    assert (cfg.advantage.scale, cfg.advantage.eps) == (base.advantage.scale, base.advantage.eps)
    assert cfg.objective == base.objective and cfg.objective.kl_coef == 0
    assert ADVANTAGES.declaration("ace").needs == ("ref_logprobs",)
    with pytest.raises(ConfigError, match="advantage.alpha"):
        resolve({"method": "ace", "advantage": {"alpha": -1.0}})


def test_the_trainer_builds_the_reference_for_ace_at_kl_0_and_not_for_grpo_and_c_starts_at_0():
    assert Trainer(small_config(method="grpo"), MemoryReporter()).learner.reference is None
    cfg = small_config(method="ace", schedule={"steps": 2})
    assert cfg.objective.kl_coef == 0
    trainer = Trainer(cfg, MemoryReporter())
    assert trainer.learner.reference is not None
    seen = []
    provide = trainer.learner.provide  # what the learner fills in just before the advantage stage
    trainer.learner.provide = lambda batch: provide(batch) or seen.append(batch.ref_logprobs is not None)
    assert trainer.run() == "succeeded"
    rows = trainer.reporter.metric_rows
    assert seen == [True, True] and len(rows) == 2
    first = rows[0]
    assert abs(first[CONFIDENCE_SHIFT]) < 1e-3  # before the first update the sampler is the reference
    if first[OVERCONFIDENT_ERRORS] or first[PENALTY_FACTOR] != 1.0:  # a step with negative advantages
        assert first[PENALTY_FACTOR] == pytest.approx(1 + math.log(2), abs=1e-3)
    assert all(row[PENALTY_FACTOR] >= 1 and 0 <= row[OVERCONFIDENT_ERRORS] <= 1 for row in rows)


def test_with_a_kl_term_the_reference_runs_once_per_step_and_the_loss_reads_the_same_numbers():
    """(Kept from the first ACE's tests: the re-added one must not score the reference twice.)"""
    trainer = Trainer(small_config(method="ace", schedule={"steps": 2}, objective={"kl_coef": 0.1}), MemoryReporter())
    calls, forward = [], trainer.learner.reference.forward

    def counted(*args, **kwargs):
        calls.append("prompts" if kwargs.get("past_key_values") is None else "completions")
        return forward(*args, **kwargs)

    trainer.learner.reference.forward = counted
    assert trainer.run() == "succeeded"
    # one pass a step (its prompts, then its completions), for the advantage stage; the KL term reuses it
    assert calls == ["prompts", "completions"] * 2
    kl = [v for _, v in trainer.reporter.series("policy/kl_ref")]
    assert len(kl) == 2 and kl[0] < 1e-6  # the first update's policy is the reference
