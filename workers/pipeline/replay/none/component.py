"""`none`: the replay stage's default: nothing is kept, every batch is fresh."""

from __future__ import annotations

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import ReplayStage


class NoReplay(ReplayStage):
    """Every batch is fresh: nothing is stored, nothing reused (on-policy GRPO)."""

    Knobs = Knobs

    def __init__(self, cfg):
        pass

    def mix(self, batch: RolloutBatch, step: int) -> RolloutBatch:
        batch.note("replay", "fresh")
        return batch

    def store(self, batch: RolloutBatch, step: int) -> None:
        pass
