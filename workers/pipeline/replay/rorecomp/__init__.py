"""Priority batches of short-correct and long-incorrect completions; the rest replayed as compensation (RoRecomp).

Paper: *RoRecomp: Enhancing Reasoning Efficiency via Rollout Response Recomposition in
Reinforcement Learning* (2025, the seed list).

The code: component.py (RolloutRecomposition).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class RoRecompKnobs(Knobs):
    compensation_every: int = Field(
        2, ge=1, le=1000, description="Every k-th step the buffered completions are trained on (compensation)."
    )
    capacity: int = Field(
        256, ge=1, le=100_000, description="Groups the buffer holds; the oldest are dropped beyond it."
    )


COMPONENT = Component(
    "rorecomp",
    "component:RolloutRecomposition",
    knobs=RoRecompKnobs,
    reuses_samples=True,
    checked=Checked(
        presets="rorecomp",
        paper="RoRecomp 2025 (abstract)",
        how="documented choice: the selection fraction, one half on either side (lower and upper median)",
        card="rorecomp.md",
        quote="fraction is this card's: one half",
    ),
)
