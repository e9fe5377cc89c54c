"""ACE: negative advantages scaled by 1 + alpha softplus(c), c = log pi - log pi_ref of the completion."""

import math

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def one_group(rewards, shifts, lengths):
    """A scored group whose sample i has reward rewards[i] and confidence shift shifts[i], spread over its tokens."""
    n, width = len(rewards), max(lengths)
    batch = scored([n])
    batch.rewards = torch.tensor(rewards, dtype=torch.float)
    batch.correct = batch.rewards > 0
    batch.mask = torch.tensor([[1.0] * length + [0.0] * (width - length) for length in lengths])
    batch.tokens = torch.zeros(n, width, dtype=torch.long)
    batch.ref_logprobs = -1.5 * batch.mask  # (N, T)
    per_token = torch.tensor(shifts) / torch.tensor(lengths, dtype=torch.float)
    batch.logprobs = (batch.ref_logprobs + per_token[:, None]) * batch.mask + 7.0 * (1 - batch.mask)  # junk off-mask
    return batch


def ace(batch, alpha=1.0):
    return ADVANTAGES.get("ace")(resolve({"advantage": {"name": "ace", "alpha": alpha}}))(batch)


REWARDS = [1, 0, 0, 0, 1, 0]
SHIFTS = [3.0, -2.0, 0.0, 2.5, -4.0, 6.0]  # two correct (0, 4), four wrong with rising c: 1, 2, 3, 5
LENGTHS = [2, 3, 1, 4, 2, 3]


def test_positive_advantages_are_untouched_and_negative_ones_scaled_by_the_softplus_factor():
    batch = one_group(REWARDS, SHIFTS, LENGTHS)
    grpo = ADVANTAGES.get("group-mean")(resolve({}))(batch).advantages
    out = ace(batch, alpha=0.5)
    positive = grpo > 0
    assert positive.tolist() == [True, False, False, False, True, False]
    assert torch.equal(out.advantages[positive], grpo[positive])
    for i in (1, 2, 3, 5):
        expected = float(grpo[i]) * (1 + 0.5 * math.log1p(math.exp(SHIFTS[i])))
        assert float(out.advantages[i]) == pytest.approx(expected, rel=1e-5)
    assert torch.equal(torch.sign(out.advantages), torch.sign(grpo))


def test_the_penalty_grows_monotonically_with_the_confidence_shift():
    batch = one_group(REWARDS, SHIFTS, LENGTHS)
    out = ace(batch)
    wrong_by_shift = sorted((1, 2, 3, 5), key=lambda i: SHIFTS[i])  # c: -2, 0, 2.5, 6
    penalties = [float(-out.advantages[i]) for i in wrong_by_shift]
    assert penalties == sorted(penalties) and len(set(penalties)) == 4
    assert out.stats["pipeline/advantage/overconfident_errors"] == 0.5  # c > 0 for 2 of the 4 errors
    assert out.stats["pipeline/advantage/confidence_shift"] == pytest.approx(sum(SHIFTS) / 6, rel=1e-5)


def test_alpha_zero_is_grpo_and_a_batch_without_reference_logprobs_is_refused():
    batch = one_group(REWARDS, SHIFTS, LENGTHS)
    grpo = ADVANTAGES.get("group-mean")(resolve({}))(batch).advantages
    torch.testing.assert_close(ace(batch, alpha=0.0).advantages, grpo)
    batch.ref_logprobs = None
    with pytest.raises(ValueError, match="ref_logprobs"):
        ace(batch)


def test_the_trainer_scores_the_reference_for_ace_and_not_for_grpo():
    assert Trainer(small_config(schedule={"steps": 1}), MemoryReporter()).learner.reference is None
    reporter = MemoryReporter()
    trainer = Trainer(small_config(method="ace", schedule={"steps": 3}), reporter)
    assert trainer.cfg.objective.kl_coef == 0 and trainer.learner.reference is not None
    assert trainer.run() == "succeeded"
    shifts = [v for _, v in reporter.series("pipeline/advantage/confidence_shift")]
    assert len(shifts) == 3
    assert abs(shifts[0]) < 1e-4  # before any update the policy is the reference: c = 0 to rounding
    assert any(abs(s) > 1e-4 for s in shifts[1:])  # after updates it has moved


def test_with_a_kl_term_the_reference_runs_once_per_step_and_the_loss_reads_the_same_numbers():
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
