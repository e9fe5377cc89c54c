"""The token clip with a minimum-variance off-policy baseline and an ESS-scaled step (VCPO, Huang et al. 2026).

Paper: Huang, Zhang, Hu, Yang and Han 2026, *Stable Asynchrony: Variance-Controlled Off-Policy RL
for LLMs* (VCPO).

The code: component.py (VarianceControlled).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Checked, Component


class VarianceControlledKnobs(ObjectiveKnobs):
    """The token clip's knobs, and how the effective sample size scales the step."""

    ess_power: float = Field(
        1.0,
        ge=0,
        le=10.0,
        description="The learning rate of an optimizer step is multiplied by ESS^ess_power, ESS = (sum w)^2 / "
        "(n sum w^2) of the minibatch's sequence importance weights w = pi / pi_old (1 on-policy, 1/n when one "
        "sequence dominates); 0 leaves the step alone.",
    )
    baseline: bool = Field(
        True,
        description="Subtract from each advantage the minimum-variance off-policy baseline of its group, "
        "b = sum w^2 A / sum w^2 over the group's sequences in the minibatch (0 on-policy for a group-centred "
        "advantage; a group with one sequence in the minibatch keeps its advantage).",
    )


COMPONENT = Component(
    "variance-controlled",
    "component:VarianceControlled",
    knobs=VarianceControlledKnobs,
    acts_when="off-policy",
    checked=Checked(
        presets="vcpo",
        paper="Huang et al. 2026 (VCPO, abstract)",
        how="documented choice: the rate scaled linearly by the ESS",
        card="vcpo.md",
        quote="the power 1 (rate ∝ ESS) is this card's choice.",
    ),
)
