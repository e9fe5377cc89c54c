"""`truncated-is`: the token clip weighted by the bounded ratio pi_old / pi_sampler (TIS; MIS when masked).

The token clip (token_clip/component.py) with one seam changed: the weight of a token's surrogate.
Its numbers are reported under the names in workers/metrics.py.
"""

from __future__ import annotations

import math

import torch

from workers import metrics
from workers.pipeline.objective.base import masked_mean
from workers.pipeline.objective.token_clip.component import TokenClip
from workers.pipeline.objective.truncated_is import TruncatedISKnobs
from workers.pipeline.stages import LossInputs


class TruncatedIS(TokenClip):
    """The token clip weighted by the truncated or masked ratio pi_old / pi_sampler (TIS, Yao et al. 2025).

    The rollout backend and the trainer compute log-probabilities with different numerics (another
    dtype, kernels or engine), so a batch is sampled from pi_sampler, not from the trainer's pi_old.
    Yao et al. 2025 (*Your Efficient RL Framework Secretly Brings You Off-Policy RL Training*)
    correct the gradient by w_t = pi_old(o_t) / pi_sampler(o_t), truncated at C: the loss is the
    token clip's surrogate times min(w_t, C). Masked importance sampling (Liu et al. 2025, *When
    Speed Kills Stability*) instead zeroes a token over the bound: w_t 1[w_t <= C].

    level=sequence uses the product of a completion's token weights, W_i = prod_t w_t = pi_old(y_i) /
    pi_sampler(y_i) (the sequence importance weight, not its geometric mean), bounded once and
    shared by every token of the completion. A masked token keeps its place in the loss's
    normaliser (its term is 0), so masking never enlarges the other tokens' weight.
    The weight is the token clip's behaviour weight (the decoupled form's pi_prox / pi_behaviour) given to
    every row, with this bound and mode: a row an older policy sampled gets it once, not twice
    (objective.behaviour_is_bound is not used).
    Shapes: logprobs, old_logprobs, sampler_logprobs (B, T) -> weights (B, T), no gradient.
    Knobs: objective.is_bound (C), is_mode, is_level, and the token clip's.
    """

    Knobs = TruncatedISKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        o = cfg.objective
        self.log_bound, self.mode, self.level = math.log(o.is_bound), o.is_mode, o.is_level

    @torch.no_grad()
    def behaviour_weights(self, x: LossInputs) -> tuple[torch.Tensor, dict[str, float]]:
        log_w = (x.old_logprobs - x.behaviour_logprobs) * x.mask  # (B, T)
        if self.level == "sequence":
            log_w = log_w.sum(-1, keepdim=True).expand_as(log_w)  # (B, T): the completion's log W_i on each token
        over = log_w > self.log_bound
        weight = torch.exp(log_w.clamp(max=self.log_bound))  # min(w, C), without overflowing a long product
        if self.mode == "mask":
            weight = torch.where(over, torch.zeros_like(weight), weight)
        return weight, {
            metrics.IS_WEIGHT_MEAN: masked_mean(weight, x.mask),
            metrics.IS_OVER_BOUND: masked_mean(over.float(), x.mask),
        }
