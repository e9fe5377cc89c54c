"""GRPO's advantage; negative ones scaled by 1 + alpha·softplus(log pi/pi_ref) of the completion (ACE).

Paper: Xu et al. 2026, *Overconfident Errors Need Stronger Correction: Asymmetric Confidence
Penalties for Reinforcement Learning* (arXiv 2602.21420).

The code: component.py (ConfidencePenalizedGroupMean).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.registry import Checked, Component


class ConfidencePenaltyKnobs(GroupEstimatorKnobs):
    alpha: float = Field(
        1.0,
        ge=0,
        le=100,
        description="alpha: a negative advantage is multiplied by 1 + alpha x softplus(c), c the completion's "
        "log-likelihood under the policy minus under the reference policy (0: GRPO).",
    )


COMPONENT = Component(
    "ace",
    "component:ConfidencePenalizedGroupMean",
    knobs=ConfidencePenaltyKnobs,
    needs=("ref_logprobs",),
    checked=Checked(
        presets="ace",
        paper="Xu et al. 2026 (ACE)",
        how="documented choice: α = 1",
        card="ace.md",
        quote="α = 1 is this card's choice.",
    ),
)
