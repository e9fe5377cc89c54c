"""GSPO's sequence-level ratio, clipped per sequence (Zheng et al. 2025, eq. 5-7).

Paper: Zheng et al. 2025, *Group Sequence Policy Optimization* (GSPO), eq. 5-7.

The code: component.py (SequenceClip).
"""

from __future__ import annotations

from workers.pipeline.objective.shared import ObjectiveKnobs
from workers.registry import Component

COMPONENT = Component("sequence-clip", "component:SequenceClip", knobs=ObjectiveKnobs, acts_when="off-policy")
