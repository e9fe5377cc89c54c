"""Train on the prompts whose adaptive difficulty, estimated by attention over measured ones, is nearest 0.5 (DOTS).

Paper: *Improving Data Efficiency for LLM Reinforcement Fine-tuning Through Difficulty-targeted
Online Data Selection and Rollout Replay* (DOTS, 2025, the seed list).

The code: component.py (DifficultyTargetedSelection).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class DOTSKnobs(Knobs):
    candidates_per_prompt: int = Field(4, ge=1, le=64, description="Candidates drawn per prompt trained on.")
    target: float = Field(0.5, gt=0, lt=1, description="The adaptive difficulty (failure rate) aimed at.")
    temperature: float = Field(
        0.1, gt=0, le=10, description="Temperature of the attention over the reference set (cosine similarity)."
    )


COMPONENT = Component(
    "dots",
    "component:DifficultyTargetedSelection",
    knobs=DOTSKnobs,
    checked=Checked(
        presets="dots",
        paper="DOTS 2025 (abstract)",
        how="documented choice: the reference set is the last step's prompts",
        card="dots.md",
        quote="the reference set is the prompts the previous step rolled",
    ),
)
