"""Roll out the prompts whose Thompson-sampled pass rate is nearest the target (MoPPS); no extra rollouts.

Paper: Qu et al. 2025, *Can Prompt Difficulty be Online Predicted for Accelerating RL Finetuning
of Reasoning Models?* (arXiv 2507.04632), sec. 3.

The code: component.py (ModelPredictivePromptSelection).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class MoPPSKnobs(Knobs):
    candidates_per_prompt: int = Field(
        8, ge=1, le=64, description="Candidates drawn per prompt rolled out (the authors' ts_ratio: 8)."
    )
    target: float = Field(0.5, gt=0, lt=1, description="The pass rate the selected prompts are predicted to have.")
    decay: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Forgetting per visit: the share of a prompt's old posterior kept when new outcomes arrive "
        "(1 = never forget; the authors use 0.5).",
    )
    prior: float = Field(1.0, gt=0, le=1e6, description="alpha_0 = beta_0 of the Beta prior (1: uniform).")


COMPONENT = Component(
    "mopps",
    "component:ModelPredictivePromptSelection",
    knobs=MoPPSKnobs,
    checked=Checked(
        presets="mopps",
        paper="Qu et al. 2025 (MoPPS), sec. 3, and the authors' code",
        how="documented choice: forgetting per visit, as the authors' code",
        card="mopps.md",
        quote="the forgetting is applied per visit of the prompt (as in the",
    ),
)
