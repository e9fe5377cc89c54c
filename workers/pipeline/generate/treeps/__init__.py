"""Grow each group as a tree of episodes: a few roots, branched at turn boundaries, G leaves (TreePS-RAG).

Paper: Zhang et al. 2026, *TreePS-RAG: Tree-based Process Supervision for Reinforcement Learning in Agentic RAG*
(arXiv 2601.06922): each agentic step is a node of a rollout tree, built online under a budget comparable to
independent rollouts; the advantage stage's `treeps` reads the tree (Monte Carlo values of its nodes).

The code: component.py (TreeRollouts). Needs multi-turn episodes (an environment).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class TreePSKnobs(Knobs):
    roots: int = Field(
        2,
        ge=1,
        le=256,
        description="Episodes each tree starts from its prompt (at most the group size); the rest of the group's "
        "G rollouts are branches.",
    )
    branch_after: int = Field(
        1, ge=1, le=63, description="The turn after which a tree first branches: its children share that many turns."
    )
    branch_levels: int = Field(
        1,
        ge=1,
        le=8,
        description="Consecutive turns, from branch_after on, after each of which the live paths branch again; the "
        "leaves are split evenly over the levels (the last level takes whatever budget is left).",
    )


def check(cfg) -> None:
    if cfg.environment.name == "none":
        raise ValueError(
            "environment.name: generate treeps branches multi-turn episodes at turn boundaries; choose an "
            "environment (e.g. calculator)"
        )
    g = cfg.generate
    if g.branch_after + g.branch_levels - 1 >= cfg.environment.max_turns:
        raise ValueError(
            f"generate.branch_after: a tree branching after turn {g.branch_after + g.branch_levels - 1} has no turn "
            f"left to branch into with environment.max_turns {cfg.environment.max_turns}"
        )
    if g.roots >= cfg.rollout.group_size:
        raise ValueError(
            f"generate.roots: {g.roots} roots of a group of {cfg.rollout.group_size} leave no rollout to branch; "
            "choose fewer roots or a larger rollout.group_size"
        )


COMPONENT = Component(
    "treeps",
    "component:TreeRollouts",
    knobs=TreePSKnobs,
    check=check,
    checked=Checked(
        presets="treeps",
        paper="Zhang et al. 2026 (TreePS-RAG), abstract (online tree construction under a constrained budget)",
        how="documented choice: M roots branched after chosen turns, the budget split evenly, G leaves",
        card="treeps.md",
        quote="the tree holds exactly G leaves",
    ),
)
