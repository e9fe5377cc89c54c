"""The token clip on rho_t times the smallest ratio of the tokens before it (MinPRO, Lei et al. 2026).

Paper: Lei, Cheng and Tao 2026, *A Step Back: Prefix Importance Ratio Stabilizes Policy
Optimization* (MinPRO, arXiv 2601.22718).

The code: component.py (MinPrefixRatio).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Checked, Component


class MinPrefixKnobs(ObjectiveKnobs):
    """The token clip's knobs, and which prefix the minimum is taken over."""

    prefix: Literal["preceding", "inclusive"] = Field(
        "preceding",
        description="preceding: token t's ratio is min_{j<t} rho_j x rho_t, the smallest ratio of the tokens "
        "before it (no gradient) times its own (the paper's form); inclusive: min_{j<=t} rho_j in place of "
        "rho_t, this component's earlier form, kept to compare: once one token's ratio is below 1 - clip_low, "
        "no later token of a negative-advantage completion gets a gradient.",
        json_schema_extra={"acts_when": "off-policy"},
    )


COMPONENT = Component(
    "min-prefix-ratio",
    "component:MinPrefixRatio",
    knobs=MinPrefixKnobs,
    acts_when="off-policy",
    checked=Checked(
        presets="minpro",
        paper="Lei et al. 2026 (MinPRO, abstract)",
        how="paper form as the abstract states it (ρ_t times the minimum before it); 4 minibatches is a choice",
        card="minpro.md",
        quote="m_{t−1} = min_{j<t} ρ_j (1 for a completion's first token)",
    ),
)
