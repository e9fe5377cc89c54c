"""Every group is trained on, informative or not (GRPO).

Paper: Shao et al. 2024, *DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
Models* (GRPO trains on every sampled group).

The code: component.py (KeepAll).
"""

from __future__ import annotations

from workers.pipeline.filter.shared import FilterKnobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "none",
    "component:KeepAll",
    knobs=FilterKnobs,
    checked=Checked(
        presets="grpo and every preset but dapo, dars",
        paper="Shao et al. 2024",
        how="paper form",
        card="grpo.md",
        quote="every group trains (`filter: none`)",
    ),
)
