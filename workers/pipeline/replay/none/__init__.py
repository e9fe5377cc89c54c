"""Every batch is fresh: nothing is stored, nothing reused (on-policy GRPO).

Paper: Shao et al. 2024, *DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
Models* (GRPO, on-policy: each step trains on the groups it sampled).

The code: component.py (NoReplay).
"""

from __future__ import annotations

from workers.knobs import Knobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "none",
    "component:NoReplay",
    knobs=Knobs,
    checked=Checked(
        presets="grpo and every preset but dots, rorecomp",
        paper="Shao et al. 2024",
        how="paper form",
        card="grpo.md",
        quote="then dropped (`replay: none`)",
    ),
)
