"""The objective stage's losses, the k3 KL estimate and the loss aggregations (see __init__)."""

from __future__ import annotations

import math

import torch

from workers import metrics
from workers.pipeline.objective.knobs import ObjectiveKnobs
from workers.pipeline.stages import LossInputs, LossOutput, ObjectiveStage


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

    Four seams for the off-policy corrections built on it (offpolicy.py, fiberpo.py, proximal.py): `ratio`
    (the rho_t the surrogate clips), `clipped` (its counterpart in the min: where the min picks it, the
    token's gradient is gated), `behaviour_weights` (the importance weight pi_prox / pi_behaviour, and which
    rows carry it) and `weights` (any further constant per-token factor of the surrogate, and its stats). The
    clip shares are read off `clipped`, so they count whatever gate a subclass builds.
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
