"""Advantage stage: the baseline each sample is compared with, and the scale.

Every estimator maps group rewards (P, n) to advantages (P, n) and an in_loss
mask (P, n) saying which samples carry gradient.
"""

from __future__ import annotations

import torch

from workers.registry import Registry

ADVANTAGES: Registry[type] = Registry("advantage estimator")


def scale(centered: torch.Tensor, rewards: torch.Tensor, how: str, eps: float) -> torch.Tensor:
    """Divide by the group's (unbiased) reward standard deviation, or leave as is."""
    if how == "none":
        return centered
    return centered / (rewards.std(dim=-1, keepdim=True) + eps)


@ADVANTAGES.register("group-mean")
class GroupMean:
    """A_i = (r_i - mean(r)) / (std(r) + eps) over the group (GRPO: Shao et al. 2024, eq. 3).

    With advantage.scale = none this is Dr. GRPO's unscaled advantage
    (Liu et al. 2025, "Understanding R1-Zero-Like Training", sec. 3.2).
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale, advantage.eps.
    """

    def __init__(self, cfg):
        self.how, self.eps = cfg.advantage.scale, cfg.advantage.eps

    def __call__(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centered = rewards - rewards.mean(dim=-1, keepdim=True)
        return scale(centered, rewards, self.how, self.eps), torch.ones_like(rewards, dtype=torch.bool)


@ADVANTAGES.register("leave-one-out")
class LeaveOneOut:
    """A_i = r_i - mean_{j != i} r_j: a sample never enters its own baseline.

    RLOO (Ahmadian et al. 2024, "Back to Basics", eq. 7; Kool et al. 2019).
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale (RLOO uses none).
    """

    def __init__(self, cfg):
        self.how, self.eps = cfg.advantage.scale, cfg.advantage.eps

    def __call__(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = rewards.shape[-1]
        others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (n - 1)
        return scale(rewards - others_mean, rewards, self.how, self.eps), torch.ones_like(rewards, dtype=torch.bool)


@ADVANTAGES.register("group-median")
class GroupMedian:
    """A_i = (r_i - median(r)) / (std(r) + eps); the median sample (the pivot) is left out of the loss.

    MC-GRPO (Kim 2026, "Median-Centered Group Relative Policy Optimization for
    Small-Rollout RL", sec. 3): with G+1 samples the group has one exact median;
    that pivot has zero advantage by construction and is excluded from
    backpropagation, so G samples per prompt carry gradient. The median is far
    less moved by one outlying reward than the mean, so fewer samples get the
    wrong advantage sign when G is small. For an even group the lower median is used.
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale, advantage.eps.
    """

    def __init__(self, cfg):
        self.how, self.eps = cfg.advantage.scale, cfg.advantage.eps

    def __call__(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = rewards.shape[-1]
        order = rewards.argsort(dim=-1, stable=True)  # (P, n)
        pivot = order[:, (n - 1) // 2 : (n - 1) // 2 + 1]  # (P, 1) index of the median sample
        median = rewards.gather(-1, pivot)  # (P, 1)
        in_loss = torch.ones_like(rewards, dtype=torch.bool).scatter(-1, pivot, False)
        advantages = scale(rewards - median, rewards, self.how, self.eps)
        return advantages.scatter(-1, pivot, 0.0), in_loss
