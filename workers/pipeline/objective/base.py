"""What the objective stage's losses share: the ratio statistics, the KL estimates and the loss aggregations."""

from __future__ import annotations

import math

import torch

from workers import metrics
from workers.pipeline.stages import LossInputs


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


def sequence_log_weights(x: LossInputs) -> torch.Tensor:
    """(B,) log w_i = sum_t (log pi - log pi_behaviour): the log of each sequence's importance weight against the
    policy that sampled it, no gradient. For a fresh row of an `hf` float32 run pi_behaviour is pi_old."""
    return ((x.logprobs.detach() - x.behaviour_logprobs) * x.mask).sum(-1)


def decoupled_weights(x: LossInputs, log_bound: float, rows: torch.Tensor) -> tuple[torch.Tensor | None, dict]:
    """(B, T) min(pi_prox / pi_behaviour, C) on the loss tokens of `rows` (B,) bool, 1 elsewhere; no gradient.

    The importance weight of the decoupled PPO objective (Hilton et al. 2021, *Batch size-invariance for policy
    optimization*; AReaL, Fu et al. 2025, eq. 5): a row sampled by an older policy pi_behaviour is clipped
    against the proximal policy pi_prox and weighted by pi_prox / pi_behaviour, so its staleness is corrected
    however pi_prox was obtained. log_bound = log C. None when no row needs it.
    """
    if not bool(rows.any()):
        return None, {}
    picked = rows[:, None] & (x.mask > 0)  # (B, T) the tokens the weight applies to
    log_w = (x.old_logprobs - x.behaviour_logprobs).detach()  # (B, T)
    weight = torch.where(picked, torch.exp(log_w.clamp(max=log_bound)), torch.ones_like(log_w))
    tokens = picked.float()
    return weight, {
        metrics.STALE_IS_WEIGHT_MEAN: masked_mean(weight, tokens),
        metrics.STALE_IS_OVER_BOUND: masked_mean((log_w > log_bound).float(), tokens),
    }


def stale_share(x: LossInputs) -> dict[str, float]:
    """policy/stale_rows: the share of the minibatch's loss rows an older policy sampled (nothing if none is)."""
    in_loss = (x.mask.sum(-1) > 0).float()
    stale = x.stale.float()
    return {metrics.STALE_ROWS: masked_mean(stale, in_loss)} if bool((stale * in_loss).any()) else {}


def effective_sample_size(log_w: torch.Tensor) -> float:
    """(sum w)^2 / (n sum w^2) of the weights exp(log_w) (n,), computed in log space: in [1/n, 1]."""
    if log_w.numel() == 0:
        return 1.0
    log_n = math.log(log_w.numel())
    return float(torch.exp(2 * torch.logsumexp(log_w, 0) - log_n - torch.logsumexp(2 * log_w, 0)).clamp(max=1.0))


def off_policy_stats(x: LossInputs) -> dict[str, float]:
    """How far the policy has moved, whatever the objective does with it.

    The ESS of the sequence weights against the policy that drew the rows (pi / pi_behaviour), and the token
    ratios the clip sees (pi / pi_old, pi_old the proximal policy) over loss tokens; on a fresh batch's first
    optimizer step every ratio is 1. Shapes: logprobs, old_logprobs, mask (B, T).
    """
    in_loss = x.mask.sum(-1) > 0  # (B,)
    token = x.mask > 0  # (B, T)
    ratio = torch.exp(x.logprobs.detach() - x.old_logprobs)[token]  # (N,) loss tokens
    if ratio.numel() == 0:
        return {}
    return {
        metrics.ESS: effective_sample_size(sequence_log_weights(x)[in_loss]),
        metrics.TOKEN_RATIO_MEAN: float(ratio.mean()),
        metrics.TOKEN_RATIO_MAX: float(ratio.max()),
        metrics.TOKEN_RATIO_MIN: float(ratio.min()),
        metrics.TOKEN_RATIO_OUTSIDE: float(((ratio < 0.8) | (ratio > 1.2)).float().mean()),
        **stale_share(x),
    }


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


def k2_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k2 estimate (log pi - log pi_ref)^2 / 2, the log-gap bounded as k3's. Shapes: (B, T) -> (B, T)."""
    gap = (logprobs - ref_logprobs).clamp(-KL_LOG_GAP_LIMIT, KL_LOG_GAP_LIMIT)
    return 0.5 * gap**2


def k1_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k1 estimate log pi - log pi_ref, bounded as k3's; negative where pi < pi_ref. (B, T) -> (B, T)."""
    return (logprobs - ref_logprobs).clamp(-KL_LOG_GAP_LIMIT, KL_LOG_GAP_LIMIT)


KL_ESTIMATORS = {"k3": k3_kl, "k2": k2_kl, "k1": k1_kl}  # objective.kl_estimator -> (logprobs, ref) -> (B, T)


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
