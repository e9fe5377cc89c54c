"""MoPPS against GRPO on the tiny testbed, 3 seeds each, the same rollout budget (docs/methods/mopps.md).

python examples/sweep_mopps.py      # 6 runs, about 10 minutes on two CPU cores
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
VARIANTS = {
    "grpo": (["method=grpo"], "groups/frac_zero_std"),
    "mopps": (["method=mopps"], "groups/frac_zero_std"),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-mopps")
