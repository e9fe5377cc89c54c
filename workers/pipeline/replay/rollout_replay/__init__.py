"""Each step trains on its fresh groups plus recent informative groups from a FIFO buffer (DOTS's rollout replay).

Paper: *Improving Data Efficiency for LLM Reinforcement Fine-tuning Through Difficulty-targeted
Online Data Selection and Rollout Replay* (DOTS, 2025, the seed list), its rollout replay.

The code: component.py (RolloutReplay).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class RolloutReplayKnobs(Knobs):
    groups: int = Field(16, ge=0, le=4096, description="Buffered groups added to each step's fresh ones.")
    capacity: int = Field(
        128, ge=1, le=100_000, description="Groups the buffer holds (the most recent; older ones are dropped)."
    )


COMPONENT = Component(
    "rollout-replay",
    "component:RolloutReplay",
    knobs=RolloutReplayKnobs,
    reuses_samples=True,
    checked=Checked(
        presets="dots",
        paper="DOTS 2025 (abstract)",
        how="documented choice: a uniform draw from the first-in first-out buffer",
        card="dots.md",
        quote="Replay draws uniformly from the buffer.",
    ),
)
