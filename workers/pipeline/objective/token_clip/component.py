"""`token-clip`: PPO's clipped surrogate per token: the stage's default, and the base of the off-policy
corrections (truncated-is, min-prefix-ratio, variance-controlled, fiber-gate, ewma-proximal).
"""

from __future__ import annotations

import math

import torch

from workers import metrics
from workers.pipeline.objective.base import decoupled_weights, masked_mean, token_advantages
from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.pipeline.stages import LossInputs, LossOutput, ObjectiveStage


class TokenClip(ObjectiveStage):
    """PPO's clipped surrogate per token (Schulman et al. 2017, eq. 7; GRPO: Shao et al. 2024, eq. 3).

    L_t = -min(rho_t A, clip(rho_t, 1 - clip_low, 1 + clip_high) A), rho_t = pi(o_t) / pi_old(o_t).
    DAPO's clip-higher (Yu et al. 2025, sec. 3.1) is clip_high > clip_low.
    Shapes: logprobs (B, T), advantages (B,) or (B, T). Knobs: objective.clip_low, clip_high, aggregation.

    Rows an older policy sampled (LossInputs.staleness > 0: replayed, continued from an older prefix, or an
    asynchronous batch) take the decoupled form: rho_t is their ratio to the proximal policy pi_prox, and each
    of their loss tokens is weighted by min(pi_prox / pi_behaviour, C), C = objective.behaviour_is_bound
    (decoupled_weights). The weight is the same whether pi_prox was recomputed or the sampler's numbers were
    carried: the trainer recomputes pi_prox for such rows in both cases. A fresh row's weight is 1.

    Four seams for the off-policy corrections built on it (the folders truncated_is, min_prefix_ratio,
    variance_controlled, fiber_gate, ewma_proximal): `ratio` (the rho_t the surrogate clips), `clipped` (its
    counterpart in the min: where the min picks it, the token's gradient is gated), `behaviour_weights` (the
    importance weight pi_prox / pi_behaviour, and which rows carry it) and `weights` (any further constant
    per-token factor of the surrogate, and its stats). The clip shares are read off `clipped`, so they count
    whatever gate a subclass builds.
    """

    Knobs = ObjectiveKnobs

    def __init__(self, cfg):
        self.low, self.high = cfg.objective.clip_low, cfg.objective.clip_high
        self.log_behaviour_bound = math.log(cfg.objective.behaviour_is_bound)

    def ratio(self, x: LossInputs) -> torch.Tensor:
        """(B, T) rho_t = pi(o_t) / pi_old(o_t), differentiable."""
        return torch.exp(x.logprobs - x.old_logprobs)

    def clipped(self, x: LossInputs, ratio: torch.Tensor) -> torch.Tensor:
        """(B, T) the other side of the surrogate's min: clip(rho_t, 1 - clip_low, 1 + clip_high)."""
        return ratio.clamp(1 - self.low, 1 + self.high)

    def behaviour_weights(self, x: LossInputs) -> tuple[torch.Tensor | None, dict[str, float]]:
        """(B, T) the importance weight pi_prox / pi_behaviour of the stale rows' tokens, bounded (None: all 1)."""
        return decoupled_weights(x, self.log_behaviour_bound, x.stale)

    def weights(self, x: LossInputs) -> tuple[torch.Tensor | None, dict[str, float]]:
        """(B, T) a further factor of each token's surrogate, no gradient (None: 1); and what it did."""
        return None, {}

    def __call__(self, x: LossInputs) -> LossOutput:
        ratio = self.ratio(x)  # (B, T)
        advantage = token_advantages(x)  # (B, 1) or (B, T)
        unclipped = ratio * advantage
        bound = self.clipped(x, ratio)  # (B, T)
        surrogate = -torch.minimum(unclipped, bound * advantage)  # (B, T)
        behaviour, behaviour_stats = self.behaviour_weights(x)
        weight, weight_stats = self.weights(x)
        for factor in (behaviour, weight):
            if factor is not None:
                surrogate = surrogate * factor
        loss = x.aggregate(surrogate)
        with torch.no_grad():  # the min picks the clipped side: below for A < 0, above for A > 0
            low = ((bound > ratio) & (advantage < 0)).float()
            high = ((bound < ratio) & (advantage > 0)).float()
            stats = {
                metrics.CLIP_RATIO_LOW: masked_mean(low, x.mask),
                metrics.CLIP_RATIO_HIGH: masked_mean(high, x.mask),
                **behaviour_stats,
                **weight_stats,
            }
        return LossOutput(loss=loss, stats=stats)
