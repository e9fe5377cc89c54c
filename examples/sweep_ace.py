"""ACE against GRPO on the tiny testbed, 3 seeds each (docs/methods/ace.md).

ACE scales the negative advantages of completions the policy has grown more confident in than the
initial policy was; the observable is that confidence shift and how much it scaled the penalties.

    python examples/sweep_ace.py      # 6 runs (the grpo ones are shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
OBSERVABLE = "pipeline/advantage/confidence_shift"
VARIANTS = {
    "grpo": (["method=grpo"], OBSERVABLE),
    "ace": (["method=ace"], OBSERVABLE),
}
DIAGNOSTICS = [
    "pipeline/advantage/confidence_shift",
    "pipeline/advantage/overconfident_errors",
    "pipeline/advantage/penalty_factor",
    "advantage/abs_mean",
]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods", DIAGNOSTICS)
