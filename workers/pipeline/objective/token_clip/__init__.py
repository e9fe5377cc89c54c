"""PPO's clipped surrogate per token (Schulman et al. 2017, eq. 7; GRPO: Shao et al. 2024, eq. 3).

Paper: Schulman et al. 2017, *Proximal Policy Optimization Algorithms*, eq. 7; GRPO: Shao et al.
2024, *DeepSeekMath*, eq. 3; the decoupled form for stale rows: Hilton et al. 2021, *Batch
size-invariance for policy optimization*.

The code: component.py (TokenClip).
"""

from __future__ import annotations

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "token-clip",
    "component:TokenClip",
    knobs=ObjectiveKnobs,
    checked=Checked(
        presets="grpo and every preset that sets no objective",
        paper="Schulman et al. 2017, eq. 7; Shao et al. 2024, eq. 3",
        how="paper form; KL 0 is this project's choice (the paper's 0.04)",
        card="grpo.md",
        quote="the paper used 0.04; 0 is this project's choice",
    ),
)
