"""Three rewards (correct 1, format 0.5, length 0.25): GRPO on their weighted sum against GDPO, 3 seeds each.

GRPO normalises the summed reward within each group; GDPO normalises each reward within the group
on its own first (docs/methods/gdpo.md). Both runs are given the same weights.

    python examples/sweep_multi_reward.py      # 6 runs
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
WEIGHTS = "reward.weights={correct: 1.0, format: 0.5, length: 0.25}"
VARIANTS = {
    "grpo (summed rewards)": (["method=grpo", WEIGHTS], "reward/format/mean"),
    "gdpo": (["method=gdpo", WEIGHTS], "reward/format/mean"),
}
DIAGNOSTICS = ["reward/correct/mean", "reward/format/mean", "reward/length/mean", "advantage/abs_mean"]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-multi-reward", DIAGNOSTICS)
