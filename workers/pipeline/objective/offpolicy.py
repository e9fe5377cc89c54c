"""Off-policy corrections of the token clip: truncated importance sampling, MinPRO and VCPO.

Each is the token clip (base.TokenClip) with one seam changed: the weight of a token's surrogate
(TIS), the ratio it clips (MinPRO), or the advantages and the step size (VCPO). Their knobs are
declared in knobs.py; their numbers are reported under the names in workers/metrics.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from workers import metrics
from workers.pipeline.objective.base import (
    TokenClip,
    effective_sample_size,
    masked_mean,
    sequence_advantages,
    sequence_log_weights,
)
from workers.pipeline.objective.knobs import MinPrefixKnobs, TruncatedISKnobs, VarianceControlledKnobs
from workers.pipeline.stages import LossInputs, LossOutput


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


def prefix_min_log_ratio(log_ratio: torch.Tensor, mask: torch.Tensor, inclusive: bool = False) -> torch.Tensor:
    """(B, T) min over the loss tokens j < t of log rho_j (0, rho = 1, before a row's first loss token); with
    `inclusive`, over j <= t. Tokens outside the mask neither count nor get one (0)."""
    ignored = torch.where(mask > 0, log_ratio, torch.full_like(log_ratio, math.inf))
    running = torch.cummin(ignored, dim=-1).values  # (B, T) over j <= t
    if not inclusive:  # shifted one position right: the minimum over the tokens before t
        running = torch.cat([torch.full_like(running[:, :1], math.inf), running[:, :-1]], dim=-1)
        running = torch.where(running.isinf(), torch.zeros_like(running), running)  # no token before: rho = 1
    return torch.where(mask > 0, running, torch.zeros_like(running))


class MinPrefixRatio(TokenClip):
    """The token clip on rho_t times the smallest ratio of the tokens before it (MinPRO, Lei et al. 2026).

    *A Step Back: Prefix Importance Ratio Stabilizes Policy Optimization*: the exact off-policy
    correction of token t is the prefix ratio prod_{j<=t} rho_j, which explodes or vanishes with
    length; the token ratio rho_t alone ignores how far the prefix already drifted. MinPRO replaces the
    cumulative product of the preceding prefix by its smallest factor: the ratio of token t is
    m_{t-1} rho_t, with m_{t-1} = min_{j<t} rho_j (1 for a row's first token), a constant (no gradient), and
    rho_t the token's own ratio, through which the gradient flows: a prefix that any earlier token made
    unlikely under pi down-weights every later token, and each token is still clipped on its own drift.
    objective.prefix = inclusive is the form this component had before (m_t = min_{j<=t} rho_j in place of
    rho_t, a running minimum that includes the token itself); kept to compare, not the paper's.
    Only loss tokens count (padding and tokens an advantage stage masked are skipped).
    Shapes: logprobs (B, T) -> ratio (B, T). Knobs: objective.prefix and the token clip's.
    """

    Knobs = MinPrefixKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.inclusive = cfg.objective.prefix == "inclusive"

    def ratio(self, x: LossInputs) -> torch.Tensor:
        log_ratio = x.logprobs - x.old_logprobs  # (B, T)
        minimum = prefix_min_log_ratio(log_ratio.detach(), x.mask, self.inclusive)  # (B, T)
        if self.inclusive:  # value m_t, gradient m_t d log pi(o_t)
            return torch.exp(log_ratio - log_ratio.detach() + minimum)
        return torch.exp(log_ratio + minimum)  # value m_{t-1} rho_t; padding (minimum 0) keeps rho_t

    @torch.no_grad()
    def weights(self, x: LossInputs) -> tuple[None, dict[str, float]]:
        log_ratio = x.logprobs - x.old_logprobs
        minimum = prefix_min_log_ratio(log_ratio, x.mask, self.inclusive)
        return None, {
            metrics.PREFIX_MIN_RATIO_MEAN: masked_mean(torch.exp(minimum), x.mask),
            metrics.PREFIX_MIN_BELOW_TOKEN: masked_mean((minimum < log_ratio).float(), x.mask),
        }


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
