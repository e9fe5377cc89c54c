"""The same budget every step: rollout.prompts_per_step x rollout.group_size, rollout.max_new_tokens.

Paper: Shao et al. 2024, *DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
Models* (GRPO: a fixed number of questions per step, G outputs each).

The code: component.py (FixedBudget).
"""

from __future__ import annotations

from workers.knobs import Knobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "fixed",
    "component:FixedBudget",
    knobs=Knobs,
    checked=Checked(
        presets="grpo and every preset that sets no control stage",
        paper="Shao et al. 2024",
        how="paper form",
        card="grpo.md",
        quote="with one length limit (`control: fixed`)",
    ),
)
