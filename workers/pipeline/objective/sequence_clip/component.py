"""`sequence-clip`: GSPO's clipped surrogate on each sequence's length-normalised ratio."""

from __future__ import annotations

import math

import torch

from workers import metrics
from workers.pipeline.objective.base import masked_mean, sequence_advantages
from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.pipeline.stages import LossInputs, LossOutput, ObjectiveStage


class SequenceClip(ObjectiveStage):
    """GSPO's sequence-level ratio, clipped per sequence (Zheng et al. 2025, eq. 5-7).

    s_i = exp(mean_t(log pi(o_t) - log pi_old(o_t))), the length-normalised
    sequence likelihood ratio; L_i = -min(s_i A_i, clip(s_i, 1 - clip_low,
    1 + clip_high) A_i), averaged over sequences. Every token of a sequence
    shares one ratio, so one sequence is clipped (or not) as a whole.
    Shapes: logprobs (B, T) -> ratio (B,). Knobs: objective.clip_low, clip_high
    (the paper uses 3e-4 and 4e-4).

    A row an older policy sampled takes the decoupled form at the sequence level: s_i is its ratio to the
    proximal policy, and its term is weighted by min(exp(mean_t(log pi_prox - log pi_behaviour)), C), the
    length-normalised behaviour ratio, as s_i is length-normalised (C = objective.behaviour_is_bound).
    """

    Knobs = ObjectiveKnobs

    def __init__(self, cfg):
        self.low, self.high = cfg.objective.clip_low, cfg.objective.clip_high
        self.log_behaviour_bound = math.log(cfg.objective.behaviour_is_bound)

    @torch.no_grad()
    def behaviour_weights(self, x: LossInputs, lengths: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """(B,) min(exp(mean_t log pi_prox / pi_behaviour), C) for the stale rows, 1 for the others; and stats."""
        log_w = ((x.old_logprobs - x.behaviour_logprobs) * x.mask).sum(-1) / lengths.clamp(min=1)  # (B,)
        stale = x.stale & (lengths > 0)
        weight = torch.where(stale, torch.exp(log_w.clamp(max=self.log_behaviour_bound)), torch.ones_like(log_w))
        if not bool(stale.any()):
            return weight, {}
        return weight, {
            metrics.STALE_IS_WEIGHT_MEAN: masked_mean(weight, stale.float()),
            metrics.STALE_IS_OVER_BOUND: masked_mean((log_w > self.log_behaviour_bound).float(), stale.float()),
        }

    def __call__(self, x: LossInputs) -> LossOutput:
        lengths = x.mask.sum(-1)  # (B,)
        in_loss = lengths > 0
        log_ratio = ((x.logprobs - x.old_logprobs) * x.mask).sum(-1) / lengths.clamp(min=1)  # (B,)
        ratio = torch.exp(log_ratio)
        advantages = sequence_advantages(x)  # (B,)
        unclipped = ratio * advantages
        clipped = ratio.clamp(1 - self.low, 1 + self.high) * advantages
        behaviour, behaviour_stats = self.behaviour_weights(x, lengths)  # (B,)
        per_sequence = -torch.minimum(unclipped, clipped) * behaviour  # (B,)
        loss = (per_sequence * in_loss).sum() / in_loss.sum().clamp(min=1)
        with torch.no_grad():
            weight = in_loss.float()
            stats = {
                **behaviour_stats,
                metrics.CLIP_RATIO_LOW: masked_mean(((ratio < 1 - self.low) & (advantages < 0)).float(), weight),
                metrics.CLIP_RATIO_HIGH: masked_mean(((ratio > 1 + self.high) & (advantages > 0)).float(), weight),
                metrics.SEQUENCE_RATIO_MEAN: masked_mean(ratio, weight),
            }
        return LossOutput(loss=loss, stats=stats)
