"""The replay stage's components as RunConfig knows them: names, summaries and knobs (no torch here)."""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Registry

REPLAYS: Registry[type] = Registry("replay component")


REPLAYS.declare(
    "none",
    "workers.pipeline.replay.base:NoReplay",
    summary="Every batch is fresh: nothing is stored, nothing reused (on-policy GRPO).",
    knobs=Knobs,
)


class RolloutReplayKnobs(Knobs):
    groups: int = Field(16, ge=0, le=4096, description="Buffered groups added to each step's fresh ones.")
    capacity: int = Field(
        128, ge=1, le=100_000, description="Groups the buffer holds (the most recent; older ones are dropped)."
    )


REPLAYS.declare(
    "rollout-replay",
    "workers.pipeline.replay.rollout_replay:RolloutReplay",
    summary="Each step trains on its fresh groups plus recent informative groups from a FIFO buffer "
    "(DOTS's rollout replay).",
    knobs=RolloutReplayKnobs,
    reuses_samples=True,
)


class RoRecompKnobs(Knobs):
    compensation_every: int = Field(
        2, ge=1, le=1000, description="Every k-th step the buffered completions are trained on (compensation)."
    )
    capacity: int = Field(
        256, ge=1, le=100_000, description="Groups the buffer holds; the oldest are dropped beyond it."
    )


REPLAYS.declare(
    "rorecomp",
    "workers.pipeline.replay.rorecomp:RolloutRecomposition",
    summary="Priority batches of short-correct and long-incorrect completions; the rest replayed as compensation "
    "(RoRecomp).",
    knobs=RoRecompKnobs,
    reuses_samples=True,
)
