"""GRPO's advantage, amplified for correct completions less likely than their group's mean (XRPO).

Paper: Bamba et al. 2025, *XRPO: Pushing the limits of GRPO with Targeted Exploration and
Exploitation* (arXiv 2510.06672), the novelty-aware advantage sharpening.

The code: component.py (NoveltySharpenedGroupMean).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.registry import Checked, Component


class NoveltySharpeningKnobs(GroupEstimatorKnobs):
    novelty: float = Field(
        1.0,
        ge=0,
        le=100,
        description="lambda: the amplification per nat of per-token log-likelihood below the group's mean (0: GRPO).",
    )
    cap: float = Field(
        0.5, ge=0, le=10, description="The most a positive advantage is amplified: by a factor of at most 1 + cap."
    )


COMPONENT = Component(
    "xrpo",
    "component:NoveltySharpenedGroupMean",
    knobs=NoveltySharpeningKnobs,
    checked=Checked(
        presets="xrpo",
        paper="Bamba et al. 2025 (XRPO)",
        how="documented choice: a multiplicative, capped sharpening",
        card="xrpo.md",
        quote="The sharpening is multiplicative and capped",
    ),
)
