"""`ace`: GRPO's advantage, with a stronger penalty for errors the policy has grown confident in.

ACE, the Asymmetric Confidence-aware Error Penalty (Xu et al. 2026, "Overconfident Errors Need
Stronger Correction: Asymmetric Confidence Penalties for Reinforcement Learning", arXiv
2602.21420). GRPO penalises every wrong rollout of a group alike; ACE measures how far the policy
has moved towards a rollout since the reference policy, its confidence shift

    c_i = log pi_theta(y_i | x) - log pi_ref(y_i | x)       (sums over the completion's tokens)

and scales the negative advantages by it:

    A_i' = A_i * (1 + alpha * softplus(c_i))    if A_i < 0
    A_i' = A_i                                  otherwise,

A_i being GRPO's (r_i - mean(r)) / (std(r) + eps). The factor is at least 1 and grows with c, so
no sign changes, positive advantages are untouched, and an error the policy has learned to prefer
(c > 0) is pushed down harder than one it never favoured. softplus(0) = ln 2, so at the start of
training (policy = reference, c = 0) every negative advantage is already scaled by 1 + alpha ln 2:
the form the paper writes, kept as it is rather than shifted to make that factor 1.

pi_theta is the policy that sampled the batch (its log-probabilities are in the batch: the current
policy before this step's update, at the sampling temperature); pi_ref is the frozen initial
policy, the one objective.kl_coef measures against, scored by the trainer at the same temperature
because this component declares needs=("ref_logprobs",). A completion's c is a sum over its
tokens, so it is larger in size for longer completions, as in the paper's sequence-level ratio.
Shapes: logprobs, ref_logprobs, mask (N, T) -> advantages (N,).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workers.pipeline.advantage.ace import ConfidencePenaltyKnobs
from workers.pipeline.advantage.group_mean.component import GroupMean
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput


def confidence_shift(batch: RolloutBatch) -> torch.Tensor:
    """(N,): log pi_theta(y|x) - log pi_ref(y|x), each summed over the completion's tokens."""
    if batch.ref_logprobs is None:
        raise ValueError("ace needs the batch's ref_logprobs; the trainer fills them for components that declare it")
    mask = batch.mask.float().cpu()  # (N, T)
    return ((batch.logprobs.float().cpu() - batch.ref_logprobs.float().cpu()) * mask).sum(-1)


def penalty_factor(advantages: torch.Tensor, shift: torch.Tensor, alpha: float) -> torch.Tensor:
    """(N,): 1 + alpha * softplus(c) where the advantage is negative, else 1."""
    return torch.where(advantages < 0, 1 + alpha * F.softplus(shift), torch.ones_like(shift))


class ConfidencePenalizedGroupMean(GroupMean):
    """GRPO's advantage; negative ones scaled by 1 + alpha·softplus(log pi/pi_ref) of the completion (ACE).

    Knobs: advantage.alpha, and GRPO's advantage.scale, advantage.eps. Reports
    pipeline/advantage/confidence_shift (mean c of the batch), pipeline/advantage/overconfident_errors
    (share of the negative-advantage samples with c > 0) and pipeline/advantage/penalty_factor (their
    mean factor, 1 when there are none).
    """

    Knobs = ConfidencePenaltyKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.alpha = cfg.advantage.alpha

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        out = super().__call__(batch)  # GRPO's group-normalised advantage, every group size
        shift = confidence_shift(batch)  # (N,)
        factor = penalty_factor(out.advantages, shift, self.alpha)  # (N,)
        negative = out.advantages < 0
        stats = {
            "pipeline/advantage/confidence_shift": float(shift.mean()),
            "pipeline/advantage/overconfident_errors": float((shift[negative] > 0).float().mean())
            if negative.any()
            else 0.0,
            "pipeline/advantage/penalty_factor": float(factor[negative].mean()) if negative.any() else 1.0,
        }
        return AdvantageOutput(out.advantages * factor, out.in_loss, stats)
