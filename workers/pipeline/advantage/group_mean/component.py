"""`group-mean`: GRPO's group-normalised advantage, the stage's default and the estimator most others extend."""

from __future__ import annotations

import torch

from workers.pipeline.advantage.base import GroupEstimator


class GroupMean(GroupEstimator):
    """A_i = (r_i - mean(r)) / (std(r) + eps) over the group (GRPO: Shao et al. 2024, eq. 3).

    With advantage.scale = none this is Dr. GRPO's unscaled advantage
    (Liu et al. 2025, "Understanding R1-Zero-Like Training", sec. 3.2).
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale, advantage.eps.
    """

    def per_group(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centered = rewards - rewards.mean(dim=-1, keepdim=True)
        return self.normalize(centered, rewards), torch.ones_like(rewards, dtype=torch.bool)
