"""`rollout-replay`: each step trains on fresh groups plus recent informative groups from a buffer.

The rollout replay of DOTS ("Improving Data Efficiency for LLM Reinforcement Fine-tuning Through
Difficulty-targeted Online Data Selection and Rollout Replay", 2025, the seed list), after
experience replay in classic RL: the groups a step trained on that carried a gradient (rewards
not all equal) go into a first-in first-out buffer of recent rollouts, and each step adds
`groups` of them, drawn at random, to its fresh groups. A preset using it rolls out that many
fewer fresh prompts per step, so a step costs fewer rollout tokens for the same batch size.

A replayed group was sampled by an older policy. It keeps its sampler's log-probabilities and
version, and the objective gives it the decoupled correction (clipped against the learner before
the step, weighted by its ratio to the sampler: objective/token_clip), whether π_old is recomputed or
carried; the group's advantages are recomputed from its rewards, which have not changed.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.replay.rollout_replay import RolloutReplayKnobs
from workers.pipeline.stages import ReplayStage


class RolloutReplay(ReplayStage):
    """Each step trains on its fresh groups plus recent informative groups from a FIFO buffer (DOTS's rollout replay).

    Knobs: replay.groups, replay.capacity. Reports pipeline/replay/replayed_groups,
    pipeline/replay/buffer and pipeline/replay/mean_age (steps since the replayed groups were sampled).
    """

    Knobs = RolloutReplayKnobs

    def __init__(self, cfg):
        self.groups, self.capacity = cfg.replay.groups, cfg.replay.capacity
        self.buffer: deque[RolloutBatch] = deque()  # one group each, oldest first
        self.rng = np.random.default_rng([cfg.seed, 0x7265706C])  # its own stream: the data order stays put
        self.fresh = 0
        self.last: dict[str, float] = {}

    def mix(self, batch: RolloutBatch, step: int) -> RolloutBatch:
        batch.note("replay", "fresh")
        self.fresh = batch.num_groups
        take = min(self.groups, len(self.buffer))
        picked = sorted(self.rng.choice(len(self.buffer), size=take, replace=False).tolist()) if take else []
        replayed = [self.buffer[i] for i in picked]
        for group in replayed:
            group.note("replay", f"replayed (sampled at step {group.born_step})")
            group.in_loss = None  # the filter's verdict of its own step was applied when it was stored
        self.last = {
            "pipeline/replay/replayed_groups": float(len(replayed)),
            "pipeline/replay/mean_age": float(np.mean([step - g.born_step for g in replayed])) if replayed else 0.0,
        }
        if not replayed:
            return batch
        fresh_in_loss = batch.in_loss
        mixed = RolloutBatch.concat([batch, *replayed])
        if fresh_in_loss is not None:  # the fresh rows keep the filter's verdict; replayed rows all train
            mixed.in_loss = mixed.mask.new_ones(mixed.num_samples).bool().cpu()
            mixed.in_loss[: len(fresh_in_loss)] = fresh_in_loss
        return mixed

    def store(self, batch: RolloutBatch, step: int) -> None:
        """Buffer the fresh groups whose rewards differ (the ones that carried a gradient)."""
        rewards = batch.rewards.cpu()
        for g in range(self.fresh):
            rows = slice(batch.offsets[g], batch.offsets[g + 1])
            if float(rewards[rows].max()) > float(rewards[rows].min()):
                group = batch.select_groups([g])
                group.advantages, group.token_mask = None, None  # recomputed when it is replayed
                group.born_step = step  # the trained batch may hold older, replayed groups too
                self.buffer.append(group)
        while len(self.buffer) > self.capacity:
            self.buffer.popleft()
        self.last["pipeline/replay/buffer"] = float(len(self.buffer))

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
