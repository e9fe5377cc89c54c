"""APRIL against GRPO on the tiny testbed, 3 seeds each, the same rollout budget (docs/methods/april.md).

python examples/sweep_april.py     # 6 runs (the grpo ones shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
VARIANTS = {
    "grpo": (["method=grpo"], "throughput/rollout_tokens_per_s"),
    "april": (["method=april"], "throughput/rollout_tokens_per_s"),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
