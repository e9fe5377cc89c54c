"""`ace`: GRPO's group-normalised advantage, with a heavier penalty on errors the policy has grown confident in.

ACE, the Asymmetric Confidence-aware Error Penalty (Xu et al. 2026, "Overconfident Errors Need
Stronger Correction: Asymmetric Confidence Penalties for Reinforcement Learning", arXiv 2602.21420):
GRPO penalises every wrong rollout of a group alike, so an error the training has come to prefer
keeps its probability mass. ACE measures, per rollout, how far the policy has moved towards it since
the reference (initial) policy,

    c_i = log pi_theta(y_i|x) - log pi_ref(y_i|x)        each a sum over the completion's tokens

and scales the negative advantages by it:

    A_i' = A_i * (1 + alpha * softplus(c_i))    if A_i < 0
    A_i' = A_i                                  otherwise (positive and zero advantages)

where A_i is GRPO's (r_i - mean(r)) / (std(r) + eps). pi_theta is the policy that sampled the
batch (batch.logprobs, at the sampling temperature); pi_ref is the frozen initial policy, whose
log-probabilities the trainer fills into batch.ref_logprobs, at the same temperature, because the
declaration says needs=("ref_logprobs",). The factor is at least 1 and rises with c, so no sign
changes; softplus(0) = ln 2, so before the first update (c = 0) every negative advantage is already
scaled by 1 + alpha ln 2 (docs/methods/ace.md keeps the form as written). Shapes: logprobs,
ref_logprobs, mask (N, T) -> advantages (N,); groups of any size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workers.pipeline.advantage.ace import ConfidencePenaltyKnobs
from workers.pipeline.advantage.group_mean.component import GroupMean
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput

CONFIDENCE_SHIFT = "pipeline/advantage/confidence_shift"  # mean c over the batch's samples
OVERCONFIDENT_ERRORS = "pipeline/advantage/overconfident_errors"  # share of negative-advantage samples with c > 0
PENALTY_FACTOR = "pipeline/advantage/penalty_factor"  # mean factor on the negative advantages (1 when none)


def confidence_shift(batch: RolloutBatch) -> torch.Tensor:
    """(N,): c_i, the completion's log-likelihood under the sampling policy minus under the reference policy."""
    if batch.ref_logprobs is None:
        raise ValueError(
            "ace needs the reference policy's log-probabilities (batch.ref_logprobs); the trainer fills them "
            'for components that declare needs=("ref_logprobs",)'
        )
    if batch.ref_logprobs.shape != batch.logprobs.shape:
        raise ValueError(
            f"ace: ref_logprobs {tuple(batch.ref_logprobs.shape)} do not match the batch's logprobs "
            f"{tuple(batch.logprobs.shape)}"
        )
    on = batch.mask.cpu() > 0  # (N, T) the completion tokens
    gap = batch.logprobs.float().cpu() - batch.ref_logprobs.float().cpu()  # (N, T)
    return torch.where(on, gap, torch.zeros_like(gap)).sum(-1)  # off the completion: nothing


class AsymmetricConfidencePenalty(GroupMean):
    """GRPO's advantage; negative ones scaled by 1 + alpha softplus(log pi/pi_ref of the completion) (ACE).

    Knobs: advantage.alpha, and GRPO's advantage.scale, advantage.eps, advantage.rescale_nonzero.
    Reports pipeline/advantage/confidence_shift (mean c of the batch), .../overconfident_errors
    (share of the negative-advantage samples with c > 0; 0 when none) and .../penalty_factor (their
    mean factor; 1 when none).
    """

    Knobs = ConfidencePenaltyKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.alpha = cfg.advantage.alpha

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        shift = confidence_shift(batch)  # (N,); refuses a batch without the reference's log-probabilities
        out = super().__call__(batch)  # GRPO's group-normalised advantage, every group size
        negative = out.advantages < 0  # (N,)
        factor = torch.where(negative, 1 + self.alpha * F.softplus(shift), torch.ones_like(shift))  # (N,)
        stats = {
            CONFIDENCE_SHIFT: float(shift.mean()) if batch.num_samples else 0.0,
            OVERCONFIDENT_ERRORS: float((shift[negative] > 0).float().mean()) if negative.any() else 0.0,
            PENALTY_FACTOR: float(factor[negative].mean()) if negative.any() else 1.0,
        }
        return AdvantageOutput(out.advantages * factor, out.in_loss, stats)
