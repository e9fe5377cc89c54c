"""DARS against GRPO on the tiny testbed, 3 seeds each (docs/methods/dars.md).

DARS spends extra rollouts, so the comparison is pass@1 against counters/rollout_tokens: the
"tokens to pass@1" column, not the final pass@1 at equal steps.

python examples/sweep_dars.py --seeds 5      # 15 runs (the grpo ones are shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
OBSERVABLE = "pipeline/control/extra_rollouts"
VARIANTS = {
    "grpo": (["method=grpo"], OBSERVABLE),
    # the preset's advantage without the std division (the authors' grpo_use_std=False): the base DARS changes
    "grpo (no std)": (["method=grpo", "advantage.scale=none"], OBSERVABLE),
    "dars": (["method=dars"], OBSERVABLE),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
