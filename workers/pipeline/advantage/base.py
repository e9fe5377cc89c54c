"""What the advantage estimators share: `GroupEstimator`, the group normalisation, the reward parts; see __init__."""

from __future__ import annotations

import torch

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage


def scale(centered: torch.Tensor, rewards: torch.Tensor, how: str, eps: float) -> torch.Tensor:
    """Divide by the group's spread: the (unbiased) standard deviation, the median absolute deviation, or nothing.

    Shapes: centered, rewards (P, n) -> (P, n). The MAD is median_i |r_i - median(r)|
    with the lower median for an even group (torch.median), as MC-GRPO's code computes it.
    """
    if how == "none":
        return centered
    if how == "mad":
        median = rewards.median(dim=-1, keepdim=True).values  # (P, 1)
        return centered / ((rewards - median).abs().median(dim=-1, keepdim=True).values + eps)
    return centered / (rewards.std(dim=-1, keepdim=True) + eps)


def rescale_nonzero(advantages: torch.Tensor, atol: float = 1e-6) -> torch.Tensor:
    """Multiply each group's non-zero advantages by n / (their count); a group of zeros stays zero.

    MC-GRPO's code does this so that samples tied with the baseline (the pivot, and any
    ties with it) do not thin out the signal of the rest. Shapes: (P, n) -> (P, n).
    """
    nonzero = advantages.abs() > atol  # (P, n)
    factor = advantages.shape[-1] / nonzero.sum(dim=-1, keepdim=True).clamp(min=1)  # (P, 1)
    return torch.where(nonzero, advantages * factor, advantages)


def weighted_parts(batch: RolloutBatch, weights: dict[str, float], apart: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) the weighted sum of every reward part but `apart`, and (N,) `apart`'s weighted part.

    For the components that treat one reward function apart (grpo-lambda, drpo)."""
    rest = torch.zeros(batch.num_samples)
    for name, weight in weights.items():
        if name != apart:
            rest += weight * batch.reward_parts[name].float().cpu()
    return rest, weights[apart] * batch.reward_parts[apart].float().cpu()


class GroupEstimator(AdvantageStage):
    """An estimator that reads only each group's rewards: the spread it divides by, the optional
    non-zero rescale, and the run over each size class of a ragged batch."""

    Knobs = GroupEstimatorKnobs

    def __init__(self, cfg):
        self.how, self.eps, self.rescale = cfg.advantage.scale, cfg.advantage.eps, cfg.advantage.rescale_nonzero

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        return self.estimate(batch, batch.rewards)

    def estimate(self, batch: RolloutBatch, rewards: torch.Tensor) -> AdvantageOutput:
        """The estimator on `rewards` (N,) in place of the batch's own: for a component that rescores
        its groups (e.g. drops a reward part from some of them) and then normalises as this one does."""
        advantages = torch.zeros(batch.num_samples)
        in_loss = torch.zeros(batch.num_samples, dtype=torch.bool)
        for _, rows in batch.by_size():  # rows (P_k, n_k)
            group_advantages, group_in_loss = self.per_group(rewards[rows])
            advantages[rows], in_loss[rows] = group_advantages, group_in_loss
        return AdvantageOutput(advantages, in_loss)

    def per_group(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """rewards (P, n) -> advantages (P, n), in_loss (P, n) bool."""
        raise NotImplementedError

    def normalize(self, centered: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
        advantages = scale(centered, rewards, self.how, self.eps)
        return rescale_nonzero(advantages) if self.rescale else advantages
