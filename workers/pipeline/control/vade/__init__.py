"""Roll out the prompts with the largest Thompson-sampled variance p(1-p), from a two-scale decayed Beta (VADE).

Paper: *VADE: Variance-Aware Dynamic Sampling via Online Sample-Level Difficulty Estimation for
Multimodal RL* (2025, the seed list).

The code: component.py (VarianceAwareDynamicSampling).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class VADEKnobs(Knobs):
    candidates_per_prompt: int = Field(8, ge=1, le=64, description="Candidates drawn per prompt rolled out.")
    step_decay: float = Field(
        0.99,
        ge=0,
        le=1,
        description="Slow scale: the share of a prompt's evidence kept per training step since it was observed "
        "(1 = evidence never ages).",
    )
    visit_decay: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Fast scale: the share of a prompt's earlier evidence kept when new outcomes of it arrive.",
    )
    prior: float = Field(1.0, gt=0, le=1e6, description="alpha_0 = beta_0 of the Beta prior (1: uniform).")


COMPONENT = Component(
    "vade",
    "component:VarianceAwareDynamicSampling",
    knobs=VADEKnobs,
    checked=Checked(
        presets="vade",
        paper="VADE 2025 (abstract)",
        how="documented choice: the two scales read as per-step and per-visit decay",
        card="vade.md",
        quote="The two scales are read as a slow, per-step",
    ),
)
