"""GSPO's sequence-level ratio, clipped per sequence (Zheng et al. 2025, eq. 5-7).

Paper: Zheng et al. 2025, *Group Sequence Policy Optimization* (GSPO), eq. 5-7.

The code: component.py (SequenceClip).
"""

from __future__ import annotations

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "sequence-clip",
    "component:SequenceClip",
    knobs=ObjectiveKnobs,
    acts_when="off-policy",
    checked=Checked(
        presets="gspo",
        paper="Zheng et al. 2025 (GSPO), eq. 5–7",
        how="paper form: the range 3e-4 / 4e-4 and 4 minibatches (sec. 5.1)",
        card="gspo.md",
        quote="the paper's range",
    ),
)
