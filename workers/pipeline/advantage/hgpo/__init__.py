"""HGPO: each turn's advantage relative to the turns that share its state and, level by level, more of its history.

Paper: He et al. 2026, *Hierarchy-of-Groups Policy Optimization for Long-Horizon Agentic Tasks* (abstract, and its
released code, verl-agent's recipe/hgpo): within a group of episodes, a turn belongs to nested groups: level 0 the
turns taken from the same state (GiGPO's step group), level k those whose last k + 1 states (that state and the k
before it) are equal; its discounted return is made relative within each group of two or more, and the levels are
aggregated with weights that grow with the history a level shares.

The code: component.py (HierarchyOfGroups). Needs multi-turn episodes (an environment).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import NormalizationKnobs, check_environment
from workers.registry import Checked, Component


class HGPOKnobs(NormalizationKnobs):
    levels: int = Field(
        2,
        ge=0,
        le=8,
        description="K: the deepest level. Level k groups the turns whose last k + 1 states are equal (level 0: the "
        "state the turn is taken from alone); a turn with fewer than k turns before it has no level k.",
    )
    weight_alpha: float = Field(
        1.0,
        ge=0,
        le=10,
        description="alpha: a level weighs (n + 1)^alpha, n the states its groups share (k + 1 at level k), so "
        "groups of more consistent history count more; 0 weighs every level alike.",
    )
    discount: float = Field(
        0.95,
        ge=0,
        le=1,
        description="gamma: a turn's return is its reward part plus gamma times the next turn's return.",
    )
    episode_group: bool = Field(
        False,
        description="Also weigh in the episode's GRPO advantage, as a level sharing no state (weight 1): the "
        "released code's base_group, off there by default.",
    )


def check(cfg) -> None:
    check_environment(cfg, "hgpo")


COMPONENT = Component(
    "hgpo",
    "component:HierarchyOfGroups",
    knobs=HGPOKnobs,
    check=check,
    checked=Checked(
        presets="hgpo",
        paper="He et al. 2026 (HGPO), abstract and its released code (hierarchical groups, adaptive weights)",
        how="paper form, read off the released code (the method section was not at hand)",
        card="hgpo.md",
        quote="A(i, t) = Σ_k w_k · A_k(i, t) / Σ_k w_k",
    ),
)
