"""`leave-one-out`: RLOO's baseline, the mean of the other samples of the group."""

from __future__ import annotations

import torch

from workers.pipeline.advantage.base import GroupEstimator


class LeaveOneOut(GroupEstimator):
    """A_i = r_i - mean_{j != i} r_j: a sample never enters its own baseline.

    RLOO (Ahmadian et al. 2024, "Back to Basics", eq. 7; Kool et al. 2019).
    Shapes: rewards (P, n) -> (P, n). Knobs: advantage.scale (RLOO uses none).
    """

    def per_group(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = rewards.shape[-1]
        others_mean = (rewards.sum(dim=-1, keepdim=True) - rewards) / (n - 1)
        return self.normalize(rewards - others_mean, rewards), torch.ones_like(rewards, dtype=torch.bool)
