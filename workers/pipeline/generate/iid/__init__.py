"""G independent samples per prompt (GRPO: Shao et al. 2024, DeepSeekMath, sec. 4.1).

Paper: Shao et al. 2024, *DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
Models*, sec. 4.1 (GRPO samples a group of G outputs per question).

The code: component.py (IndependentGroups).
"""

from __future__ import annotations

from workers.knobs import Knobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "iid",
    "component:IndependentGroups",
    knobs=Knobs,
    checked=Checked(
        presets="grpo and every preset that sets no generate stage",
        paper="Shao et al. 2024 (DeepSeekMath), sec. 4.1",
        how="paper form",
        card="grpo.md",
        quote="G completions are sampled (`generate: iid`)",
    ),
)
