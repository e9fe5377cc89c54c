"""GDRO against GRPO on the tiny testbed, 3 seeds each, the same rollout budget (docs/methods/gdro.md).

python examples/sweep_gdro.py      # 6 runs (the grpo ones shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
VARIANTS = {
    "grpo": (["method=grpo"], "pipeline/control/group_size/c3"),
    "gdro": (["method=gdro"], "pipeline/control/group_size/c3"),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
