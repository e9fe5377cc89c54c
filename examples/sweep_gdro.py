"""GDRO against GRPO on the tiny testbed, 3 seeds each, the same rollout budget (docs/methods/gdro.md).

python examples/sweep_gdro.py      # 12 runs (the grpo ones shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
VARIANTS = {
    "grpo": (["method=grpo"], "pipeline/control/group_size/c3"),
    "gdro": (["method=gdro"], "pipeline/control/group_size/c3"),
    # the paper plays its two games separately ("not coupled"): each alone as well
    "gdro prompt game": (["method=gdro", "control.rollout_game=false"], "pipeline/control/drawn_hard_share"),
    "gdro rollout game": (["method=gdro", "control.prompt_game=false"], "pipeline/control/group_size/c3"),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
