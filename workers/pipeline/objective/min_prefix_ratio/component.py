"""`min-prefix-ratio`: the token clip on rho_t times the smallest ratio of the tokens before it (MinPRO).

The token clip (token_clip/component.py) with one seam changed: the ratio it clips. Its numbers are
reported under the names in workers/metrics.py.
"""

from __future__ import annotations

import math

import torch

from workers import metrics
from workers.pipeline.objective.base import masked_mean
from workers.pipeline.objective.min_prefix_ratio import MinPrefixKnobs
from workers.pipeline.objective.token_clip.component import TokenClip
from workers.pipeline.stages import LossInputs


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
