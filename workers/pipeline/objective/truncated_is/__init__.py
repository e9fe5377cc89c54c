"""The token clip weighted by the truncated or masked ratio pi_old / pi_sampler (TIS, Yao et al. 2025).

Paper: Yao et al. 2025, *Your Efficient RL Framework Secretly Brings You Off-Policy RL Training*
(TIS); the masked form: Liu et al. 2025, *When Speed Kills Stability* (MIS).

The code: component.py (TruncatedIS).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Checked, Component


class TruncatedISKnobs(ObjectiveKnobs):
    """The token clip's knobs, and how the sampler/learner mismatch weight is bounded."""

    is_bound: float = Field(
        2.0,
        ge=1,
        le=1e6,
        description="C: the bound of the importance weight pi_old / pi_sampler (pi_old the trainer's own "
        "recomputed log-probabilities, pi_sampler the rollout backend's); 2 in Yao et al. 2025.",
    )
    is_mode: Literal["truncate", "mask"] = Field(
        "truncate",
        description="truncate: a weight over the bound becomes the bound, min(w, C) (TIS); mask: a token "
        "whose weight is over the bound gets weight 0 and the others keep theirs, w 1[w <= C] (MIS).",
    )
    is_level: Literal["token", "sequence"] = Field(
        "token",
        description="token: each token's own weight; sequence: the product of a completion's token weights "
        "(its sequence likelihood ratio, no length normalisation), bounded once and shared by its tokens.",
    )


def check_recomputed_old_logprobs(cfg) -> None:
    """The weight compares the trainer's pi_old with the sampler's: with the sampler's as pi_old it is always 1.

    auto is fine: it keeps the sampler's numbers only where the two agree to rounding (a float32 `hf` policy).
    """
    if cfg.objective.old_logprobs == "sampler":
        raise ValueError(
            "objective.old_logprobs: truncated-is weighs the trainer's recomputed pi_old against the sampler's; "
            "with the sampler's log-probabilities as pi_old every weight is 1: use auto or recompute"
        )


COMPONENT = Component(
    "truncated-is",
    "component:TruncatedIS",
    knobs=TruncatedISKnobs,
    check=check_recomputed_old_logprobs,
    checked=Checked(
        presets="tis",
        paper="Yao et al. 2025 (TIS); Liu et al. 2025 (MIS)",
        how="paper form: C = 2; the upper bound only is a choice",
        card="tis.md",
        quote="Choices where the papers leave room: the upper bound only",
    ),
)
