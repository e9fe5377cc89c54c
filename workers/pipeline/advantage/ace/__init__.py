"""GRPO's advantage; negative ones scaled by 1 + alpha softplus(log pi/pi_ref of the completion) (ACE).

Paper: Xu et al. 2026, *Overconfident Errors Need Stronger Correction: Asymmetric Confidence
Penalties for Reinforcement Learning* (arXiv 2602.21420), the Asymmetric Confidence-aware Error
Penalty (the seed list, abstract).

The code: component.py (AsymmetricConfidencePenalty). It reads the reference policy's
log-probabilities, so it declares needs=("ref_logprobs",): the trainer keeps a frozen copy of the
initial policy even at objective.kl_coef 0 and scores the batch with it before the advantage stage.
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
        description="alpha: the strength of the penalty; a negative advantage is multiplied by "
        "1 + alpha softplus(c), c the completion's log-likelihood under the sampling policy minus under the "
        "initial (reference) policy, summed over its tokens (0: GRPO).",
    )


COMPONENT = Component(
    "ace",
    "component:AsymmetricConfidencePenalty",
    knobs=ConfidencePenaltyKnobs,
    needs=("ref_logprobs",),
    checked=Checked(
        presets="ace",
        paper="Xu et al. 2026 (ACE, abstract)",
        how="documented choice: the factor 1 + α softplus(c) on negative advantages, c summed over tokens; α = 1",
        card="ace.md",
        quote="Choices where the paper leaves room, or this card decided:",
    ),
)
