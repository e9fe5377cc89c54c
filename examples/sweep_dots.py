"""DOTS + rollout replay against GRPO on the tiny testbed, 3 seeds each (docs/methods/dots.md).

The testbed sets 64 prompts a step; DOTS rolls out 48 fresh and replays 16, as its preset does.

python examples/sweep_dots.py      # 6 runs (the grpo ones shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
VARIANTS = {
    "grpo": (["method=grpo"], "pipeline/replay/replayed_groups"),
    "dots": (["method=dots", "rollout.prompts_per_step=48"], "pipeline/replay/replayed_groups"),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
