"""The group estimators (group-mean, leave-one-out, group-median) and what they share; see __init__."""

from __future__ import annotations

import torch

from workers.pipeline.advantage.knobs import GroupEstimatorKnobs
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


class GroupMean(GroupEstimator):
    """A_i = (r_i - mean(r)) / (std(r) + eps) over the group (GRPO: Shao et al. 2024, eq. 3).

    With advantage.scale = none this is Dr. GRPO's unscaled advantage
    (Liu et al. 2025, "Understanding R1-Zero-Like Training", sec. 3.2).
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale, advantage.eps.
    """

    def per_group(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centered = rewards - rewards.mean(dim=-1, keepdim=True)
        return self.normalize(centered, rewards), torch.ones_like(rewards, dtype=torch.bool)


class LeaveOneOut(GroupEstimator):
    """A_i = r_i - mean_{j != i} r_j: a sample never enters its own baseline.

    RLOO (Ahmadian et al. 2024, "Back to Basics", eq. 7; Kool et al. 2019).
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale (RLOO uses none).
    """

    def per_group(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = rewards.shape[-1]
        others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (n - 1)
        return self.normalize(rewards - others_mean, rewards), torch.ones_like(rewards, dtype=torch.bool)


class GroupMedian(GroupEstimator):
    """A_i = (r_i - median(r)) / (spread + eps); the median sample (the pivot) is left out of the loss.

    MC-GRPO (Kim 2026, "Median-Centered Group Relative Policy Optimization for
    Small-Rollout RL", sec. 3): with G+1 samples the group has one exact median;
    that pivot has zero advantage by construction and is excluded from
    backpropagation, so G samples per prompt carry gradient. The median is far
    less moved by one outlying reward than the mean, so fewer samples get the
    wrong advantage sign when G is small. For an even group the lower median is used.
    The authors' code divides by the median absolute deviation plus 1e-3 and then
    multiplies a group's non-zero advantages by (G+1) / their count (the preset's
    advantage.scale: mad, eps: 1e-3, rescale_nonzero: true).
    The pivot is the sample at sorted position (n-1)//2 when the group is sorted by
    reward with ties kept in group order: of [1, 1, 0] it is sample 0, of [0, 1, 0] sample 2.
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale, advantage.eps, advantage.rescale_nonzero.
    """

    def per_group(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = rewards.shape[-1]
        order = rewards.argsort(dim=-1, stable=True)  # (P, n)
        pivot = order[:, (n - 1) // 2 : (n - 1) // 2 + 1]  # (P, 1) index of the median sample
        median = rewards.gather(-1, pivot)  # (P, 1)
        in_loss = torch.ones_like(rewards, dtype=torch.bool).scatter(-1, pivot, False)
        # the pivot's centered reward is 0 already; the scatter keeps it 0 whatever the scale does
        return self.normalize(rewards - median, rewards).scatter(-1, pivot, 0.0), in_loss
