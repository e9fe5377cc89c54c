"""Each reward normalised within its group on its own, then weighted, summed and batch-normalised (GDPO).

Paper: Liu et al. 2026, *GDPO: Group reward-Decoupled Normalization Policy Optimization for
Multi-reward RL Optimization* (arXiv 2601.05242).

The code: component.py (DecoupledGroupNormalization).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import NormalizationKnobs
from workers.registry import Checked, Component


class DecoupledKnobs(NormalizationKnobs):
    batch_norm: bool = Field(
        True,
        description="After summing the per-reward advantages, normalise the sum over the whole batch "
        "((A - mean) / (std + eps)), so its scale does not grow with the number of reward functions (GDPO).",
    )


COMPONENT = Component(
    "gdpo",
    "component:DecoupledGroupNormalization",
    knobs=DecoupledKnobs,
    checked=Checked(
        presets="gdpo",
        paper="Liu et al. 2026 (GDPO)",
        how="paper form; the preset's reward weights are a choice",
        card="gdpo.md",
        quote="`advantage.batch_norm` (on, the paper's choice)",
    ),
)
