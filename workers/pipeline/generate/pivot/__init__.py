"""G+1 samples per prompt, so an odd group has one exact median (MC-GRPO: Kim 2026, sec. 3).

Paper: Kim 2026, *MC-GRPO: Median-Centered Group Relative Policy Optimization for Small-Rollout
Reinforcement Learning* (arXiv 2601.22582), sec. 3.

The code: component.py (PivotGroups).
"""

from __future__ import annotations

from workers.knobs import Knobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "pivot",
    "component:PivotGroups",
    knobs=Knobs,
    checked=Checked(
        presets="mc-grpo",
        paper="Kim 2026 (MC-GRPO), sec. 3",
        how="paper form",
        card="mc-grpo.md",
        quote="G+1 completions are sampled per prompt",
    ),
)
