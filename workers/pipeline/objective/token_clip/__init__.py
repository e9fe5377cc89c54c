"""PPO's clipped surrogate per token (Schulman et al. 2017, eq. 7; GRPO: Shao et al. 2024, eq. 3).

Paper: Schulman et al. 2017, *Proximal Policy Optimization Algorithms*, eq. 7; GRPO: Shao et al.
2024, *DeepSeekMath*, eq. 3; the decoupled form for stale rows: Hilton et al. 2021, *Batch
size-invariance for policy optimization*.

The code: component.py (TokenClip).
"""

from __future__ import annotations

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Component

COMPONENT = Component("token-clip", "component:TokenClip", knobs=ObjectiveKnobs)
