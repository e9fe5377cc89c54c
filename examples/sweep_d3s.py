"""D3S against GRPO on the tiny testbed, 3 seeds each, the same rollout budget (docs/methods/d3s.md).

python examples/sweep_d3s.py       # 6 runs (the grpo ones shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
VARIANTS = {
    "grpo": (["method=grpo"], "pipeline/advantage/kept_tokens"),
    "d3s": (["method=d3s"], "pipeline/advantage/kept_tokens"),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
