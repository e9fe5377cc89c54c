"""`gigpo`: episode-level and anchor-state step-level relative advantages, per token (Feng et al. 2025)."""

from __future__ import annotations

from collections import defaultdict

import torch

from workers.pipeline.advantage.base import scale
from workers.pipeline.advantage.gigpo import GiGPOKnobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage


class GroupInGroup(AdvantageStage):
    """A_episode: GRPO's advantage of the episode's reward over its group. A_step: for the turns of a group taken
    from the same state (the state key before the turn: the episode's start, else the previous turn's), each turn's
    discounted return minus the step group's mean, over its spread; a turn alone in its state has A_step 0. Every
    token of a turn gets A_episode + omega * A_step; observation tokens are not trained.

    Shapes: rewards (N,) -> advantages (N, T). Knobs: advantage.step_weight (omega), discount (gamma), scale, eps.
    """

    Knobs = GiGPOKnobs

    def __init__(self, cfg):
        knobs = cfg.advantage
        self.how, self.eps = knobs.scale, knobs.eps
        self.step_weight, self.discount = knobs.step_weight, knobs.discount

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        episode = self.episode_advantages(batch)  # (N,)
        step, sizes = self.step_advantages(batch)  # {(row, turn): A_step}, step group sizes
        advantages = torch.zeros_like(batch.mask, dtype=torch.float32)  # (N, T)
        for row, record in enumerate(batch.episodes):
            for k, turn in enumerate(record.turns):
                advantages[row, turn.start : turn.end] = episode[row] + self.step_weight * step[(row, k)]
        turns = sum(sizes)
        stats = {
            "pipeline/advantage/step_groups": float(len(sizes)),
            "pipeline/advantage/turns_in_shared_states": sum(s for s in sizes if s > 1) / max(turns, 1),
        }
        return AdvantageOutput(advantages, torch.ones(batch.num_samples, dtype=torch.bool), stats)

    def episode_advantages(self, batch: RolloutBatch) -> torch.Tensor:
        advantages = torch.zeros(batch.num_samples)
        for _, rows in batch.by_size():  # rows (P_k, n_k)
            rewards = batch.rewards[rows].float()
            advantages[rows] = scale(rewards - rewards.mean(-1, keepdim=True), rewards, self.how, self.eps)
        return advantages

    def step_advantages(self, batch: RolloutBatch) -> tuple[dict[tuple[int, int], float], list[int]]:
        """A_step of every (row, turn), and the size of every step group."""
        groups: dict[tuple[int, str], list[tuple[int, int, float]]] = defaultdict(list)
        for row, record in enumerate(batch.episodes):
            group = int(batch.group_index[row])
            for k, ret in enumerate(self.returns([turn.reward for turn in record.turns])):
                anchor = record.start_state if k == 0 else record.turns[k - 1].state
                groups[(group, anchor)].append((row, k, ret))
        step = {}
        for members in groups.values():
            returns = torch.tensor([ret for _, _, ret in members])
            if len(members) > 1:
                relative = scale(returns - returns.mean(), returns, self.how, self.eps)
            else:
                relative = torch.zeros(1)
            for (row, k, _), value in zip(members, relative.tolist()):
                step[(row, k)] = value
        return step, [len(members) for members in groups.values()]

    def returns(self, rewards: list[float]) -> list[float]:
        """Each turn's discounted return: its reward part plus gamma times the next turn's return."""
        out, following = [], 0.0
        for reward in reversed(rewards):
            following = reward + self.discount * following
            out.append(following)
        return out[::-1]
