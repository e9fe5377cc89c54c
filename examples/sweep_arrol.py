"""arrol against GRPO on the tiny testbed, 3 seeds each, the same rollout budget (docs/methods/arrol.md).

python examples/sweep_arrol.py     # 6 runs (the grpo ones shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
VARIANTS = {
    "grpo": (["method=grpo"], "groups/frac_zero_std"),
    "arrol": (["method=arrol"], "groups/frac_zero_std"),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
