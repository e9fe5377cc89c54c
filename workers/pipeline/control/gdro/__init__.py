"""Adversaries over online pass-rate classes pick prompts and move rollouts to hard classes at a fixed mean (GDRO).

Paper: Panaganti et al. 2026, *Group Distributionally Robust Optimization-Driven Reinforcement
Learning for LLM Reasoning* (arXiv 2601.19280).

The code: component.py (GroupDRO).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.pipeline.control.shared import check_mean_within_bounds
from workers.registry import Checked, Component


class GDROKnobs(Knobs):
    classes: int = Field(
        4, ge=2, le=8, description="Difficulty classes of seen prompts, by pass rate (unseen: one more)."
    )
    prompt_game: bool = Field(
        True, description="Prompt-GDRO: draw the step's prompts by the classes' adversary weights."
    )
    rollout_game: bool = Field(
        True, description="Rollout-GDRO: move rollouts between classes at a fixed mean group size (rollout.group_size)."
    )
    candidates_per_prompt: int = Field(
        4, ge=1, le=64, description="Candidates drawn per prompt trained on, for the prompt game to choose from."
    )
    eta: float = Field(0.5, gt=0, le=10, description="Learning rate of the multiplicative weights.")
    ema: float = Field(0.9, ge=0, lt=1, description="Share of a class's running loss and pass rate kept per step.")
    explore: float = Field(0.1, ge=0, le=1, description="Uniform share mixed into the prompt game's class sampling.")
    pass_rate_clip: float = Field(
        0.2,
        ge=0.01,
        le=0.5,
        description="The rollout game's variance proxy p(1-p) uses the class's pass rate clipped to [clip, 1-clip], "
        "so a class that never succeeds keeps the variance of one that could: more rollouts are how it finds its "
        "first success.",
    )
    min_group: int = Field(2, ge=2, le=256, description="Fewest rollouts a prompt gets under the rollout game.")
    max_group: int = Field(16, ge=2, le=256, description="Most rollouts a prompt gets under the rollout game.")


def check_gdro(cfg) -> None:
    """The rollout game keeps a fixed mean group size, rollout.group_size: it must lie within the bounds."""
    if cfg.control.rollout_game:
        check_mean_within_bounds(cfg, "the rollout game")


COMPONENT = Component(
    "gdro",
    "component:GroupDRO",
    knobs=GDROKnobs,
    check=check_gdro,
    checked=Checked(
        presets="gdro",
        paper="Panaganti et al. 2026 (GDRO)",
        how="documented choice: classes by the last visit's pass rate",
        card="gdro.md",
        quote="the classifier uses the last visit's pass rate",
    ),
)
