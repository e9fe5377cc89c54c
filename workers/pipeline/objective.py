"""Objective stage: the policy loss built from new and old log-probabilities and advantages.

KL to the reference and the entropy bonus are added by the trainer for every
objective alike (objective.kl_coef, objective.entropy_coef), using the same
aggregation, so they are knobs of every method.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from workers.knobs import Knobs
from workers.pipeline.stages import LossInputs, LossOutput
from workers.registry import Registry

OBJECTIVES: Registry[type] = Registry("objective")


class ObjectiveKnobs(Knobs):
    """The knobs every objective shares: the clip range, the loss aggregation, KL, entropy and pi_old."""

    clip_low: float = Field(0.2, gt=0, lt=1, description="Ratio clipped below at 1 - clip_low.")
    clip_high: float = Field(
        0.2, gt=0, description="Ratio clipped above at 1 + clip_high (DAPO's clip-higher raises it)."
    )
    aggregation: Literal["sequence-mean", "sequence-sum", "token-mean", "constant"] = Field(
        "sequence-mean",
        description="How token losses become one number: sequence-mean averages each completion's tokens "
        "then the completions (GRPO); sequence-sum sums each completion's tokens, then averages the "
        "completions (RLOO: one action per completion); token-mean averages all tokens of the batch (DAPO); "
        "constant sums tokens and divides by completions x max_new_tokens (Dr. GRPO).",
    )
    kl_coef: float = Field(
        0.0,
        ge=0,
        description="Weight of the KL penalty to the frozen initial policy (k3 estimator; the log-gap is "
        "clamped to +-20 and the per-token value to 10, so one runaway token cannot make the loss inf).",
    )
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    old_logprobs: Literal["auto", "sampler", "recompute"] = Field(
        "auto",
        description="Where pi_old of the ratio comes from. sampler: the log-probabilities the rollout "
        "backend returned; recompute: one forward of the trainer's own before the first update (the "
        "sampler's kept for policy/sampler_logprob_diff); auto: recompute unless the policy is float32 "
        "and sampled by `hf`, where the two agree to rounding.",
    )


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    return float((values * mask).sum() / mask.sum().clamp(min=1))


def token_advantages(x: LossInputs) -> torch.Tensor:
    """(B, T) or (B, 1): the advantage each token's term is weighted by."""
    return x.advantages if x.advantages.dim() == 2 else x.advantages[:, None]


def sequence_advantages(x: LossInputs) -> torch.Tensor:
    """(B,): one advantage per sequence; a per-token advantage is averaged over the sequence's tokens."""
    if x.advantages.dim() == 1:
        return x.advantages
    return (x.advantages * x.mask).sum(-1) / x.mask.sum(-1).clamp(min=1)


@OBJECTIVES.register("token-clip")
class TokenClip:
    """PPO's clipped surrogate per token (Schulman et al. 2017, eq. 7; GRPO: Shao et al. 2024, eq. 3).

    L_t = -min(rho_t A, clip(rho_t, 1 - clip_low, 1 + clip_high) A), rho_t = pi(o_t) / pi_old(o_t).
    DAPO's clip-higher (Yu et al. 2025, sec. 3.1) is clip_high > clip_low.
    Shapes: logprobs (B, T), advantages (B,) or (B, T). Knobs: objective.clip_low, clip_high, aggregation.
    """

    Knobs = ObjectiveKnobs

    def __init__(self, cfg):
        self.low, self.high = cfg.objective.clip_low, cfg.objective.clip_high

    def __call__(self, x: LossInputs) -> LossOutput:
        ratio = torch.exp(x.logprobs - x.old_logprobs)  # (B, T)
        advantage = token_advantages(x)  # (B, 1) or (B, T)
        unclipped = ratio * advantage
        clipped = ratio.clamp(1 - self.low, 1 + self.high) * advantage
        loss = x.aggregate(-torch.minimum(unclipped, clipped))
        with torch.no_grad():
            low = ((ratio < 1 - self.low) & (advantage < 0)).float()
            high = ((ratio > 1 + self.high) & (advantage > 0)).float()
            stats = {
                "policy/clip_ratio/low": masked_mean(low, x.mask),
                "policy/clip_ratio/high": masked_mean(high, x.mask),
            }
        return LossOutput(loss=loss, stats=stats)


@OBJECTIVES.register("sequence-clip")
class SequenceClip:
    """GSPO's sequence-level ratio, clipped per sequence (Zheng et al. 2025, eq. 5-7).

    s_i = exp(mean_t(log pi(o_t) - log pi_old(o_t))), the length-normalised
    sequence likelihood ratio; L_i = -min(s_i A_i, clip(s_i, 1 - clip_low,
    1 + clip_high) A_i), averaged over sequences. Every token of a sequence
    shares one ratio, so one sequence is clipped (or not) as a whole.
    Shapes: logprobs (B, T) -> ratio (B,). Knobs: objective.clip_low, clip_high
    (the paper uses 3e-4 and 4e-4).
    """

    Knobs = ObjectiveKnobs

    def __init__(self, cfg):
        self.low, self.high = cfg.objective.clip_low, cfg.objective.clip_high

    def __call__(self, x: LossInputs) -> LossOutput:
        lengths = x.mask.sum(-1)  # (B,)
        in_loss = lengths > 0
        log_ratio = ((x.logprobs - x.old_logprobs) * x.mask).sum(-1) / lengths.clamp(min=1)  # (B,)
        ratio = torch.exp(log_ratio)
        advantages = sequence_advantages(x)  # (B,)
        unclipped = ratio * advantages
        clipped = ratio.clamp(1 - self.low, 1 + self.high) * advantages
        per_sequence = -torch.minimum(unclipped, clipped)  # (B,)
        loss = (per_sequence * in_loss).sum() / in_loss.sum().clamp(min=1)
        with torch.no_grad():
            weight = in_loss.float()
            stats = {
                "policy/clip_ratio/low": masked_mean(((ratio < 1 - self.low) & (advantages < 0)).float(), weight),
                "policy/clip_ratio/high": masked_mean(((ratio > 1 + self.high) & (advantages > 0)).float(), weight),
                "policy/sequence_ratio_mean": masked_mean(ratio, weight),
            }
        return LossOutput(loss=loss, stats=stats)


# The k3 estimator's log-gap and value are bounded so that one token the policy has made
# near-impossible under the reference (log-gap past ~89 overflows exp in float32) cannot turn
# the loss into inf; the bounds are far outside anything a healthy run reaches.
KL_LOG_GAP_LIMIT = 20.0
KL_VALUE_LIMIT = 10.0


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref): exp(d) - d - 1 with d = log pi_ref - log pi (Schulman 2020).

    Shapes: (B, T) -> (B, T); non-negative, 0 where the two agree.
    """
    gap = (ref_logprobs - logprobs).clamp(-KL_LOG_GAP_LIMIT, KL_LOG_GAP_LIMIT)
    return (torch.exp(gap) - gap - 1).clamp(max=KL_VALUE_LIMIT)


def aggregator(how: str, mask: torch.Tensor, max_new_tokens: int):
    """The function that turns per-token values (B, T) into the scalar loss, for objective.aggregation.

    sequence-mean: mean over each completion's tokens, then over completions (GRPO, eq. 3);
    sequence-sum: sum over each completion's tokens, then mean over completions (RLOO: the
    completion is one action, its log-likelihood the sum of its tokens', Ahmadian et al. 2024, eq. 7);
    token-mean: mean over all tokens of the batch (DAPO, eq. 12);
    constant: sum over tokens / (completions x max_new_tokens) (Dr. GRPO, sec. 3.2).
    Completions with an all-zero mask (left out of the loss) count in none of them.
    """
    sequences = (mask.sum(-1) > 0).sum().clamp(min=1)
    if how == "sequence-mean":
        per_sequence = mask.sum(-1).clamp(min=1)
        return lambda values: ((values * mask).sum(-1) / per_sequence).sum() / sequences
    if how == "sequence-sum":
        return lambda values: (values * mask).sum() / sequences
    if how == "token-mean":
        return lambda values: (values * mask).sum() / mask.sum().clamp(min=1)
    if how == "constant":
        return lambda values: (values * mask).sum() / (sequences * max_new_tokens)
    raise ValueError(f"unknown aggregation '{how}'")
