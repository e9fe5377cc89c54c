"""The decoupled token clip with an EWMA of the policy's weights as the proximal policy (PPO-EWMA).

Papers: Hilton, Cobbe and Schulman 2021, *Batch size-invariance for policy optimization*
(arXiv 2110.00641), its PPO-EWMA; Guan et al. 2026, *Missing Old Logits in Asynchronous Agentic RL:
Semantic Mismatch and Repair Methods for Off-Policy Correction* (arXiv 2605.12070).

The code: component.py (EwmaProximal).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Checked, Component


class EwmaProximalKnobs(ObjectiveKnobs):
    """The token clip's knobs, and how far the averaged proximal policy lags the policy."""

    ewma_decay: float = Field(
        0.9,
        ge=0,
        lt=1,
        description="beta of the proximal policy's average of the weights: after each optimizer step it keeps beta "
        "of itself and takes the rest from the policy (bias-corrected), so it lags the policy by about "
        "beta / (1 - beta) optimizer steps (9 at 0.9); 0 makes it the policy as it was before each step.",
    )


COMPONENT = Component(
    "ewma-proximal",
    "component:EwmaProximal",
    knobs=EwmaProximalKnobs,
    checked=Checked(
        presets="ppo-ewma",
        paper="Guan et al. 2026 (Missing Old Logits, abstract); Hilton et al. 2021 (PPO-EWMA)",
        how="documented choice: Hilton et al.'s EWMA of the weights, β = 0.9, C = 5; "
        "the revision of Guan et al. unknown",
        card="ppo-ewma.md",
        quote="Choices where the papers leave room (documented, not read off Guan et al.'s method section):",
    ),
)
