"""Send the rollout budget to the prompts and turn prefixes most likely to give mixed outcomes (TRACE).

Paper: Zou et al. 2026, *TRACE: A Unified Rollout Budget Allocation Framework for Efficient Agentic Reinforcement
Learning* (arXiv 2606.11119): each turn of a multi-turn rollout is a node; a fixed sampling budget goes to prompt
roots and to intermediate prefixes that are most likely to yield mixed terminal rewards, as a shared predictor of
the conditional success probability at each anchor, learned from prefix histories, estimates.

The code: component.py (TreeRolloutAllocation). Needs multi-turn episodes (an environment).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class TraceKnobs(Knobs):
    roots: int = Field(
        2,
        ge=1,
        le=256,
        description="Episodes every prompt starts with; the rest of the step's budget (prompts x G in all) goes to "
        "the anchors the predictor ranks first: more episodes from a prompt, or continuations of a turn prefix.",
    )
    predictor_lr: float = Field(
        0.5, gt=0, le=10, description="Step size of the predictor's gradient steps (a logistic model of success)."
    )
    predictor_steps: int = Field(
        20, ge=1, le=1000, description="Gradient steps the predictor takes on each step's anchors and outcomes."
    )
    predictor_l2: float = Field(
        1e-3, ge=0, le=10, description="L2 penalty on the predictor's weights (its bias aside)."
    )


def check(cfg) -> None:
    if cfg.environment.name == "none":
        raise ValueError(
            "environment.name: generate trace allocates rollouts to the turn prefixes of multi-turn episodes; "
            "choose an environment (e.g. calculator)"
        )
    if cfg.generate.roots >= cfg.rollout.group_size:
        raise ValueError(
            f"generate.roots: {cfg.generate.roots} episodes per prompt use the whole budget of "
            f"rollout.group_size {cfg.rollout.group_size}: none is left to allocate"
        )


COMPONENT = Component(
    "trace",
    "component:TreeRolloutAllocation",
    knobs=TraceKnobs,
    check=check,
    checked=Checked(
        presets="trace",
        paper="Zou et al. 2026 (TRACE), abstract (allocation to anchors likely to yield mixed rewards)",
        how="documented choice: greedy on the predicted gain in P(mixed outcomes); an online logistic predictor",
        card="trace.md",
        quote="the continuation whose anchor gains most in P(mixed)",
    ),
)
