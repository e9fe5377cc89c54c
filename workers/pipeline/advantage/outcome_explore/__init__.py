"""GRPO on r + c/sqrt(count of the answer for the prompt) - penalty for answers repeated in the group.

Paper: *Outcome-based Exploration for LLM Reasoning* (2025, the seed list, abstract).

The code: component.py (OutcomeExploration).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.registry import Checked, Component


class OutcomeExplorationKnobs(GroupEstimatorKnobs):
    history_bonus: float = Field(
        0.25,
        ge=0,
        le=1,
        description="c_hist: a completion's reward gains c_hist / sqrt(N), N the times its answer has been given "
        "to its prompt over the run, this step included (historical exploration; 0: off). Keep "
        "history_bonus + batch_penalty below the reward gap between a right and a wrong answer (1 with the "
        "correct reward alone) so that no bonus ranks a wrong answer above a right one.",
    )
    batch_penalty: float = Field(
        0.25,
        ge=0,
        le=1,
        description="c_batch: a completion's reward loses c_batch x (m - 1) / (n - 1), m the completions of its "
        "group (n of them) that gave the same answer, itself included (batch exploration; 0: off).",
    )
    apply_to: Literal["all", "incorrect"] = Field(
        "all",
        description="all: every completion gets the bonuses; incorrect: only the wrong ones (a right answer's "
        "reward is left as it is).",
    )


COMPONENT = Component(
    "outcome-explore",
    "component:OutcomeExploration",
    knobs=OutcomeExplorationKnobs,
    needs=("answer_counts",),
    checked=Checked(
        presets="outcome-explore",
        paper="Outcome-based Exploration 2025 (abstract)",
        how="documented choice: c/√N per (prompt, answer), c = 0.25 each, no std division",
        card="outcome-explore.md",
        quote="**The coefficients.** The abstract gives none.",
    ),
)
