"""Two gates for the token clip: on each sequence's length-normalised ratio and on each token's residual (FiberPO).

Paper: *Fibration Policy Optimization* (FiberPO; the seed list, abstract): its fiber bundle
gating, with GSPO's sequence range (Zheng et al. 2025).

The code: component.py (FiberGate).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Checked, Component


class FiberGateKnobs(ObjectiveKnobs):
    """The token clip's knobs, its range now the token residual's, and the range of the sequence gate."""

    clip_low: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="Token level: the gradient of a token with A < 0 is gated once its residual ratio r_t = "
        "rho_t / s_i (its ratio over its sequence's length-normalised ratio s_i) falls below 1 - clip_low.",
        json_schema_extra={"acts_when": "off-policy"},
    )
    clip_high: float = Field(
        0.2,
        gt=0,
        le=10,
        description="Token level: the gradient of a token with A > 0 is gated once its residual ratio r_t "
        "rises above 1 + clip_high.",
        json_schema_extra={"acts_when": "off-policy"},
    )
    sequence_clip_low: float = Field(
        3e-4,
        gt=0,
        lt=1,
        description="Sequence level: every token of a completion with A < 0 is gated once the completion's "
        "length-normalised ratio s_i = exp(mean_t log rho_t) falls below 1 - sequence_clip_low (GSPO's 3e-4).",
        json_schema_extra={"acts_when": "off-policy"},
    )
    sequence_clip_high: float = Field(
        4e-4,
        gt=0,
        le=1,
        description="Sequence level: every token of a completion with A > 0 is gated once s_i rises above "
        "1 + sequence_clip_high (GSPO's 4e-4).",
        json_schema_extra={"acts_when": "off-policy"},
    )


COMPONENT = Component(
    "fiber-gate",
    "component:FiberGate",
    knobs=FiberGateKnobs,
    acts_when="off-policy",
    checked=Checked(
        presets="fiberpo",
        paper="FiberPO 2026 (abstract)",
        how="documented choice: GSPO's range as the sequence gate's",
        card="fiberpo.md",
        quote="**The ranges.** The abstract gives none.",
    ),
)
