"""`hgpo`: each turn's return relative to nested groups of turns sharing ever more history, aggregated with
adaptive weights (He et al. 2026)."""

from __future__ import annotations

from collections import defaultdict

import torch

from workers.pipeline.advantage.hgpo import HGPOKnobs
from workers.pipeline.advantage.turns import (
    Turn,
    anchor_states,
    discounted_returns,
    episode_advantages,
    per_token,
    relative,
)
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import AdvantageOutput, AdvantageStage

Context = tuple[int, tuple[str, ...]]  # (group, the last k + 1 states a turn was taken from, oldest first)
NO_SIGNAL = 1e-6  # a level's advantage this close to 0 says nothing, and is left out of the weights


class HierarchyOfGroups(AdvantageStage):
    """A turn's history: the states its episode went through up to the one the turn was taken from (the episode's
    start, then the state after each turn before it). Level k gathers the turns of a group whose last k + 1 states
    are equal, for k = 0 .. K (a turn with fewer than k turns before it has no level k); level 0 is GiGPO's step
    group. In each group of two turns or more, A_k = (G - mean G) / (spread G + eps) of the turns' discounted returns
    G; the turn's advantage is sum_k w_k A_k / sum_k w_k over the levels where it has a peer and A_k is not 0, with
    w_k = (k + 2)^alpha ((n + 1)^alpha, n = k + 1 states shared); none such: 0. With episode_group, the episode's
    GRPO advantage is one more level, of weight 1. Every token of a turn gets the turn's advantage; observation
    tokens get 0 (they are not trained).

    Shapes: rewards (N,) -> advantages (N, T). Knobs: advantage.levels (K), weight_alpha, discount (gamma),
    episode_group, scale, eps.
    """

    Knobs = HGPOKnobs

    def __init__(self, cfg):
        knobs = cfg.advantage
        self.how, self.eps = knobs.scale, knobs.eps
        self.levels, self.alpha, self.discount = knobs.levels, knobs.weight_alpha, knobs.discount
        self.episode_group = knobs.episode_group

    def __call__(self, batch: RolloutBatch) -> AdvantageOutput:
        hierarchy = self.hierarchy(batch)
        items = self.level_advantages(batch, hierarchy)  # {turn: [(w_k, A_k)]}
        if self.episode_group:
            episode = episode_advantages(batch, self.how, self.eps)  # (N,)
            for turn in self.turns(batch):
                items[turn].insert(0, (1.0, float(episode[turn[0]])))
        advantage = {turn: aggregated(levels) for turn, levels in items.items()}
        advantages = per_token(batch, lambda turn: advantage.get(turn, 0.0))  # (N, T)
        return AdvantageOutput(advantages, torch.ones(batch.num_samples, dtype=torch.bool), self.stats(hierarchy))

    def hierarchy(self, batch: RolloutBatch) -> list[dict[Context, list[Turn]]]:
        """For each level k = 0 .. K: its groups, every context with the turns taken at its end (a group of one
        included), in the order of the batch."""
        levels: list[dict[Context, list[Turn]]] = [defaultdict(list) for _ in range(self.levels + 1)]
        group_of = batch.group_index.tolist()
        for row, record in enumerate(batch.episodes):
            anchors = anchor_states(record)
            for k in range(len(anchors)):
                for level in range(min(self.levels, k) + 1):
                    levels[level][(group_of[row], tuple(anchors[k - level : k + 1]))].append((row, k))
        return [dict(groups) for groups in levels]

    def level_advantages(self, batch: RolloutBatch, hierarchy) -> dict[Turn, list[tuple[float, float]]]:
        """Each turn's (weight, relative return) at every level where it has a peer."""
        returns = self.returns(batch)
        items: dict[Turn, list[tuple[float, float]]] = defaultdict(list)
        for level, groups in enumerate(hierarchy):
            weight = float((level + 2) ** self.alpha)
            for members in groups.values():
                if len(members) < 2:  # no peer: nothing to be relative to at this level
                    continue
                for turn, value in zip(members, relative([returns[t] for t in members], self.how, self.eps)):
                    items[turn].append((weight, value))
        return items

    def returns(self, batch: RolloutBatch) -> dict[Turn, float]:
        out = {}
        for row, record in enumerate(batch.episodes):
            for k, ret in enumerate(discounted_returns([turn.reward for turn in record.turns], self.discount)):
                out[(row, k)] = ret
        return out

    @staticmethod
    def turns(batch: RolloutBatch) -> list[Turn]:
        return [(row, k) for row, record in enumerate(batch.episodes) for k in range(len(record.turns))]

    def stats(self, hierarchy) -> dict[str, float]:
        """Per level, the share of the turns that reach it which have a peer there (the signal the level gives)."""
        stats = {}
        for level, groups in enumerate(hierarchy):
            reached = sum(len(members) for members in groups.values())
            shared = sum(len(members) for members in groups.values() if len(members) > 1)
            stats[f"pipeline/advantage/level{level}_turns_with_peers"] = shared / max(reached, 1)
        return stats


def aggregated(levels: list[tuple[float, float]]) -> float:
    """sum w A / sum w over the levels whose A is not 0 (the released code's rule: a level whose returns are all
    equal, or where the turn sits at the group's mean, leaves the others' weights); none: 0."""
    kept = [(weight, value) for weight, value in levels if abs(value) > NO_SIGNAL]
    if not kept:
        return 0.0
    return sum(weight * value for weight, value in kept) / sum(weight for weight, _ in kept)
