"""`variance-controlled`: the token clip with a minimum-variance off-policy baseline and an ESS-scaled step.

VCPO: the token clip (token_clip/component.py) with its advantages and its step size changed. Its
numbers are reported under the names in workers/metrics.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from workers import metrics
from workers.pipeline.objective.base import (
    effective_sample_size,
    masked_mean,
    sequence_advantages,
    sequence_log_weights,
)
from workers.pipeline.objective.token_clip.component import TokenClip
from workers.pipeline.objective.variance_controlled import VarianceControlledKnobs
from workers.pipeline.stages import LossInputs, LossOutput


def min_variance_baseline(
    advantages: torch.Tensor, log_w: torch.Tensor, group: torch.Tensor, in_loss: torch.Tensor
) -> torch.Tensor:
    """(B,) b_g = sum_i w_i^2 A_i / sum_i w_i^2 over the in-loss rows i of each row's group g.

    The b minimising the spread sum_i w_i^2 (A_i - b)^2 of the importance-weighted terms w_i (A_i - b)
    (the closed form, taking the score norms as equal). A group with fewer than two rows in the loss
    gets b = 0: one sample alone cannot tell its baseline from its signal.
    """
    groups = int(group.max()) + 1 if group.numel() else 0
    rows = in_loss.to(advantages.dtype)
    log_q = torch.where(in_loss, 2 * log_w, torch.full_like(log_w, -math.inf))  # (B,)
    top = torch.full((groups,), -math.inf, dtype=log_w.dtype, device=log_w.device)
    top = top.scatter_reduce(0, group, log_q, reduce="amax")  # (G,) per-group max, so exp never overflows
    q = torch.exp(log_q - top[group].clamp(min=-1e30)) * rows  # (B,) w_i^2 up to a per-group factor
    zeros = torch.zeros(groups, dtype=advantages.dtype, device=advantages.device)
    numerator = zeros.index_add(0, group, q * advantages)
    denominator = zeros.index_add(0, group, q)
    count = zeros.index_add(0, group, rows)
    baseline = numerator / denominator.clamp(min=1e-30)
    return torch.where(count[group] >= 2, baseline[group], torch.zeros_like(advantages))


class VarianceControlled(TokenClip):
    """The token clip with a minimum-variance off-policy baseline and an ESS-scaled step (VCPO, Huang et al. 2026).

    *Stable Asynchrony: Variance-Controlled Off-Policy RL for LLMs*: on stale rollouts a few
    heavy-tailed importance weights dominate the gradient; their effective sample size
    ESS = (sum_i w_i)^2 / (n sum_i w_i^2), w_i = pi(y_i) / pi_old(y_i) per sequence, falls before
    training collapses. VCPO (i) scales the step by the ESS: the learning rate of this optimizer
    step is multiplied by ESS^ess_power (LossOutput.step_scale); the rate rather than the loss,
    because Adam divides the gradient by its own running scale and so undoes a loss factor (and
    grad_clip would clip it away); (ii) subtracts a closed-form minimum-variance baseline
    b_g = sum w_i^2 A_i / sum w_i^2 within each group (min_variance_baseline), which is 0 on-policy
    for a group-centred advantage. w_i is the full product of token ratios (no length
    normalisation), so the ESS sees the tails the paper warns of.
    Shapes: logprobs (B, T), advantages (B,) or (B, T), group (B,). Knobs: objective.ess_power,
    baseline, and the token clip's.
    """

    Knobs = VarianceControlledKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.power, self.use_baseline = cfg.objective.ess_power, cfg.objective.baseline

    def __call__(self, x: LossInputs) -> LossOutput:
        log_w = sequence_log_weights(x)  # (B,)
        in_loss = x.mask.sum(-1) > 0  # (B,)
        stats = {}
        if self.use_baseline:
            group = torch.zeros_like(log_w, dtype=torch.long) if x.group is None else x.group.to(log_w.device)
            baseline = min_variance_baseline(sequence_advantages(x), log_w, group, in_loss)  # (B,)
            shift = baseline if x.advantages.dim() == 1 else baseline[:, None]
            x = replace(x, advantages=x.advantages - shift)
            stats[metrics.OFF_POLICY_BASELINE] = masked_mean(baseline.abs(), in_loss.float())
        out = super().__call__(x)
        ess = effective_sample_size(log_w[in_loss])
        out.step_scale = ess**self.power
        out.stats.update({**stats, metrics.ESS: ess, metrics.STEP_SCALE: out.step_scale})
        return out
