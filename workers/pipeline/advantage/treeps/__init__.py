"""TreePS-RAG: each turn's process advantage, its Monte Carlo value (the mean outcome below it) minus its parent's.

Paper: Zhang et al. 2026, *TreePS-RAG: Tree-based Process Supervision for Reinforcement Learning in Agentic RAG*
(arXiv 2601.06922): in a rollout tree whose nodes are the steps of an agentic episode, a step's utility is the
Monte Carlo estimate over its descendants' outcomes, which gives process advantages from outcome rewards alone.

The code: component.py (TreeProcessAdvantage). Reads the trees of the generate stage's `treeps` (or `trace`):
TurnRecord.node of every turn.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.pipeline.advantage.shared import NormalizationKnobs
from workers.registry import Checked, Component


class TreePSAdvantageKnobs(NormalizationKnobs):
    shared_tokens: Literal["once", "every_leaf"] = Field(
        "once",
        description="once: a turn that several leaves share is trained in one of their rows only (the others "
        "attend to it); every_leaf: in every row that holds it, so a node weighs as many times as it has leaves.",
    )


def check(cfg) -> None:
    if cfg.environment.name == "none":
        raise ValueError(
            "environment.name: advantage treeps values the turns of multi-turn episodes; choose an environment "
            "(e.g. calculator)"
        )


COMPONENT = Component(
    "treeps",
    "component:TreeProcessAdvantage",
    knobs=TreePSAdvantageKnobs,
    check=check,
    checked=Checked(
        presets="treeps",
        paper="Zhang et al. 2026 (TreePS-RAG), abstract (Monte Carlo step utility over descendant outcomes)",
        how="documented choice: A(n) = V(n) - V(parent of n), over the group's spread, each node trained once",
        card="treeps.md",
        quote="A(n) = (V(n) − V(parent(n))) / (std + eps)",
    ),
)
