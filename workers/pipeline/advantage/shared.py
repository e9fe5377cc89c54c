"""What the advantage stage's declarations share (no torch here): the group normalisation's knobs, and the
check of a component that treats one reward function apart, and that of one that groups the turns of episodes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.knobs import Knobs


class NormalizationKnobs(Knobs):
    """The group normalisation every estimator here shares: the spread divided by, and its eps."""

    scale: Literal["std", "mad", "none"] = Field(
        "std",
        description="std: divide by the group's standard deviation (GRPO); mad: by the median absolute "
        "deviation from the group median (MC-GRPO's code); none: do not divide (Dr. GRPO).",
    )
    eps: float = Field(1e-4, gt=0, le=1.0, description="Added to the standard deviation (or MAD) before dividing.")


class GroupEstimatorKnobs(NormalizationKnobs):
    rescale_nonzero: bool = Field(
        False,
        description="Multiply a group's non-zero advantages by n / (their count), so samples tied with the "
        "baseline do not thin the group's signal (MC-GRPO's code).",
    )


def check_reward_part(cfg, knob: str, method: str) -> None:
    """A component that treats one reward function apart needs it in reward.weights, beside at least one other."""
    name = getattr(cfg.advantage, knob)
    weights = cfg.reward.weights
    if name not in weights:
        raise ValueError(
            f"advantage.{knob}: '{name}' is not a reward of this run; {method} needs it in reward.weights "
            f"(now {', '.join(weights)})"
        )
    if len(weights) < 2:
        raise ValueError(f"advantage.{knob}: {method} needs a reward besides '{name}' in reward.weights")


def check_environment(cfg, method: str) -> None:
    """A component that groups the turns of episodes needs an environment that plays them out turn by turn."""
    if cfg.environment.name == "none":
        raise ValueError(
            f"environment.name: advantage {method} groups the turns of multi-turn episodes; choose an environment "
            "(e.g. calculator)"
        )
