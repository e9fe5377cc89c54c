"""`gated-rewards`: an episode's immediate rewards count only when its outcome meets a threshold (G-RA, Sun et al.
2025); the gated return's GRPO advantage goes to every token of the episode's turns."""

from __future__ import annotations

import torch

from workers.pipeline.advantage.base import scale
from workers.pipeline.advantage.gated_rewards import GatedRewardsKnobs
from workers.pipeline.advantage.turns import per_token
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage


class GatedRewardAccumulation(AdvantageStage):
    """r_high: the outcome, the reward part of the episode's last turn (the environment's judgement when it ends).
    r_low: the immediate rewards of the turns before it, format_weight for each well-formed one plus part_weight
    times its reward part. The episode's return is R = r_high + 1[r_high >= threshold] * sum r_low; the advantage
    is R's GRPO advantage over the group, on every token of the episode's turns (observations get 0).

    Shapes: episodes N -> advantages (N, T). Knobs: advantage.threshold (delta), format_weight, part_weight,
    scale, eps.
    """

    Knobs = GatedRewardsKnobs

    def __init__(self, cfg):
        knobs = cfg.advantage
        self.how, self.eps = knobs.scale, knobs.eps
        self.threshold, self.format_weight, self.part_weight = knobs.threshold, knobs.format_weight, knobs.part_weight

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        if batch.episodes is None:
            raise ValueError("advantage gated-rewards needs multi-turn episodes: the batch has none")
        returns, gate = self.gated_returns(batch)  # (N,), (N,) bool
        episode = self.group_relative(batch, returns)  # (N,)
        advantages = per_token(batch, lambda turn: episode[turn[0]])  # (N, T)
        stats = {
            "pipeline/advantage/gate_open": float(gate.float().mean()),
            "pipeline/advantage/immediate_reward": float((returns - self.outcomes(batch)).mean()),
        }
        return AdvantageOutput(advantages, torch.ones(batch.num_samples, dtype=torch.bool), stats)

    def gated_returns(self, batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) each episode's return R = r_high + 1[r_high >= threshold] * sum r_low, and (N,) bool the gate."""
        outcome = self.outcomes(batch)  # (N,)
        immediate = torch.tensor([self.immediate(record.turns[:-1]) for record in batch.episodes], dtype=torch.float32)
        gate = outcome >= self.threshold
        return outcome + gate * immediate, gate

    @staticmethod
    def outcomes(batch: RolloutBatch) -> torch.Tensor:
        """(N,) r_high: the reward part of each episode's last turn, the environment's judgement when it ends."""
        return torch.tensor([record.turns[-1].reward for record in batch.episodes], dtype=torch.float32)

    def immediate(self, turns) -> float:
        """The sum of the immediate rewards r_low of the turns before the last."""
        return sum(self.format_weight * turn.well_formed + self.part_weight * turn.reward for turn in turns)

    def group_relative(self, batch: RolloutBatch, returns: torch.Tensor) -> torch.Tensor:
        """(N,): each episode's return relative to its group's (mean, spread), GRPO's form."""
        advantages = torch.zeros(batch.num_samples)
        for _, rows in batch.by_size():  # rows (P_k, n_k)
            group = returns[rows]
            advantages[rows] = scale(group - group.mean(-1, keepdim=True), group, self.how, self.eps)
        return advantages
