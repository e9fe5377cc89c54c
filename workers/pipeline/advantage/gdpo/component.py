"""`gdpo`: each reward function normalised within the group on its own, then combined.

GDPO (Liu et al. 2026, "GDPO: Group reward-Decoupled Normalization Policy Optimization for
Multi-reward RL Optimization", arXiv 2601.05242). GRPO normalises the weighted reward sum, so two
rollouts whose reward parts differ but whose sums agree, (correct 1, format 0) and (correct 0,
format 1), get one advantage: distinct reward combinations collapse into the same value. GDPO
normalises each reward function's part r_k within the group first, then combines:

    A_k,i = (r_k,i - mean_group(r_k)) / (spread_group(r_k) + eps)     per reward function k
    S_i   = sum_k w_k A_k,i                                           w_k: its reward.weights entry
    A_i   = (S_i - mean_batch(S)) / (std_batch(S) + eps)              if advantage.batch_norm

The weights are the run's own reward.weights, so a part weighted 0 adds nothing and a negative
weight (a penalty) counts against the sample, as it does in the reward. The batch normalisation is
the paper's: without it the sum's scale grows with the number of reward functions. Every S is
group-centred, so the batch mean is 0 up to rounding and the step only rescales; a part constant
within its group adds 0. Shapes: reward parts (N,) each -> advantages (N,); groups of any size.
"""

from __future__ import annotations

import torch

from workers.pipeline.advantage.base import scale
from workers.pipeline.advantage.gdpo import DecoupledKnobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage


def distinct_per_group(batch: RolloutBatch, values: torch.Tensor, decimals: int = 5) -> float:
    """The mean, over groups, of the number of distinct values (rounded) a group's samples hold."""
    rounded = values.round(decimals=decimals)
    counts = [len(set(rounded[a:b].tolist())) for a, b in zip(batch.offsets, batch.offsets[1:])]
    return sum(counts) / max(1, len(counts))


class DecoupledGroupNormalization(AdvantageStage):
    """Each reward normalised within its group on its own, then weighted, summed and batch-normalised (GDPO).

    Knobs: advantage.scale, advantage.eps (per reward function, as GRPO's), advantage.batch_norm;
    the weights are reward.weights. Reports pipeline/advantage/distinct_values (distinct advantages
    per group, mean) beside pipeline/advantage/distinct_reward_sums (distinct weighted sums per
    group: what GRPO's advantage can tell apart).
    """

    Knobs = DecoupledKnobs

    def __init__(self, cfg):
        self.how, self.eps, self.batch_norm = cfg.advantage.scale, cfg.advantage.eps, cfg.advantage.batch_norm
        self.weights = dict(cfg.reward.weights)

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        summed = torch.zeros(batch.num_samples)
        for name, weight in self.weights.items():
            summed += weight * self.normalized(batch, batch.reward_parts[name].float().cpu())
        advantages = summed
        if self.batch_norm and batch.num_samples > 1:
            advantages = (summed - summed.mean()) / (summed.std() + self.eps)
        stats = {
            "pipeline/advantage/distinct_values": distinct_per_group(batch, advantages),
            "pipeline/advantage/distinct_reward_sums": distinct_per_group(batch, batch.rewards.float().cpu()),
        }
        return AdvantageOutput(advantages, torch.ones(batch.num_samples, dtype=torch.bool), stats)

    def normalized(self, batch: RolloutBatch, part: torch.Tensor) -> torch.Tensor:
        """(N,) one reward function's values -> (N,) centred and scaled within each group."""
        out = torch.zeros_like(part)
        for _, rows in batch.by_size():  # rows (P_k, n_k)
            values = part[rows]
            out[rows] = scale(values - values.mean(dim=-1, keepdim=True), values, self.how, self.eps)
        return out
