"""Replay stage: what is kept from a step and reused in later ones."""

from __future__ import annotations

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.registry import Registry

REPLAYS: Registry[type] = Registry("replay component")


@REPLAYS.register("none")
class NoReplay:
    """Every batch is fresh: nothing is stored, nothing reused (on-policy GRPO)."""

    Knobs = Knobs

    def __init__(self, cfg):
        pass

    def mix(self, batch: RolloutBatch, step: int) -> RolloutBatch:
        batch.note("replay", "fresh")
        return batch

    def store(self, batch: RolloutBatch, step: int) -> None:
        pass


from workers.pipeline.replay import rollout_replay, rorecomp  # noqa: E402, F401  (registration)
