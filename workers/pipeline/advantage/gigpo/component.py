"""`gigpo`: episode-level and anchor-state step-level relative advantages, per token (Feng et al. 2025)."""

from __future__ import annotations

from collections import defaultdict

import torch

from workers.pipeline.advantage.gigpo import GiGPOKnobs
from workers.pipeline.advantage.turns import anchor_states, discounted_returns, episode_advantages, per_token, relative
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
        episode = episode_advantages(batch, self.how, self.eps)  # (N,)
        step, sizes = self.step_advantages(batch)  # {(row, turn): A_step}, step group sizes
        advantages = per_token(batch, lambda turn: episode[turn[0]] + self.step_weight * step[turn])  # (N, T)
        turns = sum(sizes)
        stats = {
            "pipeline/advantage/step_groups": float(len(sizes)),
            "pipeline/advantage/turns_in_shared_states": sum(s for s in sizes if s > 1) / max(turns, 1),
        }
        return AdvantageOutput(advantages, torch.ones(batch.num_samples, dtype=torch.bool), stats)

    def step_advantages(self, batch: RolloutBatch) -> tuple[dict[tuple[int, int], float], list[int]]:
        """A_step of every (row, turn), and the size of every step group."""
        groups: dict[tuple[int, str], list[tuple[int, int, float]]] = defaultdict(list)
        for row, record in enumerate(batch.episodes):
            group = int(batch.group_index[row])
            returns = discounted_returns([turn.reward for turn in record.turns], self.discount)
            for k, (anchor, ret) in enumerate(zip(anchor_states(record), returns)):
                groups[(group, anchor)].append((row, k, ret))
        step = {}
        for members in groups.values():
            for (row, k, _), value in zip(members, relative([ret for _, _, ret in members], self.how, self.eps)):
                step[(row, k)] = value
        return step, [len(members) for members in groups.values()]
