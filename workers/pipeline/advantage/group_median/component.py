"""`group-median`: MC-GRPO's median baseline; the median sample (the pivot) is left out of the loss."""

from __future__ import annotations

import torch

from workers.pipeline.advantage.base import GroupEstimator


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
