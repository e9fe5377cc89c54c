"""`xrpo`: GRPO's group-normalised advantage, raised for correct completions the policy found unlikely.

XRPO's novelty-aware advantage sharpening (Bamba et al. 2025, "XRPO: Pushing the limits of GRPO
with Targeted Exploration and Exploitation", arXiv 2510.06672, the exploitation part): a correct
completion that the policy gave a lower sequence likelihood than its group usually gets carries
more information than one it would have produced anyway, so its positive advantage is amplified.
With l_i the length-normalised log-likelihood of completion i (its sampling log-probabilities
averaged over its tokens) and d_i = mean_group(l) - l_i its novelty,

    A_i' = A_i * (1 + min(lambda * d_i, cap))    if i is correct, A_i > 0 and d_i > 0,
    A_i' = A_i                                   otherwise,

where A_i is GRPO's (r_i - mean(r)) / (std(r) + eps). The factor is at least 1 and at most
1 + cap, and only positive advantages are touched: no sign ever changes, and wrong or ordinary
completions keep GRPO's value. Shapes: logprobs, mask (N, T) -> advantages (N,).
"""

from __future__ import annotations

import torch

from workers.pipeline.advantage.group_mean.component import GroupMean
from workers.pipeline.advantage.xrpo import NoveltySharpeningKnobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput


def sequence_loglik(batch: RolloutBatch) -> torch.Tensor:
    """(N,): each completion's sampling log-probability per token (0 for an empty completion)."""
    mask = batch.mask.float()
    return (batch.logprobs.float() * mask).sum(-1).cpu() / mask.sum(-1).clamp(min=1).cpu()


def novelty_factor(batch: RolloutBatch, advantages: torch.Tensor, weight: float, cap: float) -> torch.Tensor:
    """(N,): 1 + min(weight * novelty, cap) for correct samples with A > 0 less likely than their group; else 1."""
    loglik = sequence_loglik(batch)  # (N,)
    novelty = batch.group_reduce(loglik, "mean")[batch.group_index] - loglik  # (N,) > 0: rarer than the group
    sharpen = batch.correct.cpu().bool() & (advantages > 0) & (novelty > 0)
    return torch.where(sharpen, 1 + (weight * novelty).clamp(max=cap), torch.ones_like(novelty))


class NoveltySharpenedGroupMean(GroupMean):
    """GRPO's advantage, amplified for correct completions less likely than their group's mean (XRPO).

    Knobs: advantage.novelty (lambda), advantage.cap, and GRPO's advantage.scale, advantage.eps.
    Reports pipeline/advantage/sharpened (share of samples amplified) and
    pipeline/advantage/sharpen_factor (their mean factor, 1 when none).
    """

    Knobs = NoveltySharpeningKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.weight, self.cap = cfg.advantage.novelty, cfg.advantage.cap

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        out = super().__call__(batch)  # GRPO's group-normalised advantage, every group size
        factor = novelty_factor(batch, out.advantages, self.weight, self.cap)  # (N,)
        sharpened = factor > 1
        stats = {
            "pipeline/advantage/sharpened": float(sharpened.float().mean()),
            "pipeline/advantage/sharpen_factor": float(factor[sharpened].mean()) if sharpened.any() else 1.0,
        }
        return AdvantageOutput(out.advantages * factor, out.in_loss, stats)
