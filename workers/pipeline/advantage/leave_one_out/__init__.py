"""A_i = r_i - mean_{j != i} r_j: a sample never enters its own baseline.

Paper: Ahmadian et al. 2024, *Back to Basics: Revisiting REINFORCE Style Optimization for Learning
from Human Feedback in LLMs*, eq. 7 (RLOO, after Kool et al. 2019, *Buy 4 REINFORCE Samples, Get a
Baseline for Free!*).

The code: component.py (LeaveOneOut).
"""

from __future__ import annotations

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "leave-one-out",
    "component:LeaveOneOut",
    knobs=GroupEstimatorKnobs,
    checked=Checked(
        presets="rloo",
        paper="Ahmadian et al. 2024, eq. 7",
        how="paper form",
        card="rloo.md",
        quote="A_i = r_i − mean_{j≠i} r_j, with no std division",
    ),
)
