"""SPA-RL: each turn's reward is a progress estimator's contribution plus a grounding signal, then group-relative.

Paper: Wang et al. 2025, *SPA-RL: Reinforcing LLM Agents via Stepwise Progress Attribution*: a progress
estimator predicts each step's contribution, trained so that the contributions of a trajectory sum to its
outcome (a squared error on the sum); the intermediate reward of a step combines its estimated contribution with
a grounding signal, whether the action was executed in the environment.

The code: component.py (StepwiseProgressAttribution, ProgressEstimator). Needs multi-turn episodes.
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import NormalizationKnobs
from workers.registry import Checked, Component


class SPAKnobs(NormalizationKnobs):
    contribution_weight: float = Field(
        1.0, ge=0, le=100, description="alpha: the weight of a turn's estimated contribution in its reward."
    )
    grounding_weight: float = Field(
        0.5,
        ge=0,
        le=100,
        description="beta: the reward of a well-formed turn (an action the environment executed) beside its "
        "contribution.",
    )
    discount: float = Field(
        1.0,
        ge=0,
        le=1,
        description="gamma: a turn's advantage is its normalised reward plus gamma times the next turn's advantage.",
    )
    estimator_lr: float = Field(0.05, gt=0, le=10, description="Learning rate of the progress estimator (Adam).")
    estimator_steps: int = Field(
        20, ge=0, le=1000, description="Gradient steps of the progress estimator on each batch, before it attributes."
    )
    token_buckets: int = Field(
        64,
        ge=1,
        le=65_536,
        description="Buckets of the estimator's bag of a turn's tokens (token id modulo the count): what the turn "
        "says, read without a second forward of the policy.",
    )


def check(cfg) -> None:
    if cfg.environment.name == "none":
        raise ValueError(
            "environment.name: advantage spa-rl attributes the outcome of multi-turn episodes to their turns; choose "
            "an environment (e.g. calculator)"
        )


COMPONENT = Component(
    "spa-rl",
    "component:StepwiseProgressAttribution",
    knobs=SPAKnobs,
    check=check,
    checked=Checked(
        presets="spa-rl",
        paper="Wang et al. 2025, SPA-RL (estimator loss (Σ_t c_t − R)², reward α·c_t + β·g_t)",
        how="documented choice: a linear estimator on turn features trained online; group-relative, not PPO",
        card="spa-rl.md",
        quote="a turn's reward is r = α · c + β · g",
    ),
)
