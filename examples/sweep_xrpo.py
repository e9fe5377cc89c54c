"""XRPO against GRPO on the tiny testbed, 3 seeds each (docs/methods/xrpo.md).

XRPO spends extra rollouts, so the comparison is pass@1 against counters/rollout_tokens: the
"tokens to pass@1" column, not the final pass@1 at equal steps.

python examples/sweep_xrpo.py      # 6 runs (the grpo ones are shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
OBSERVABLE = "pipeline/control/extra_rollouts"
VARIANTS = {
    "grpo": (["method=grpo"], OBSERVABLE),
    "xrpo": (["method=xrpo"], OBSERVABLE),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
