"""DRPO against GRPO, with and without the same length reward, 3 seeds each (docs/methods/drpo.md).

The abstract's claim is against GRPO with a length reward, which can push correct but long
rollouts down: so the sweep runs grpo on correctness alone, grpo with the preset's length reward
summed in, and drpo; read pass@1 beside completions/mean_length. On this testbed answers are 1-3
tokens of at most 8, so lengths vary little.

    python examples/sweep_drpo.py      # 9 runs (the plain grpo ones are shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
OBSERVABLE = "pipeline/advantage/positive_weight_max"
WEIGHTS = "reward.weights={correct: 1.0, length: 1.0}"
VARIANTS = {
    "grpo": (["method=grpo"], OBSERVABLE),
    "grpo (length reward)": (["method=grpo", WEIGHTS], "reward/length/mean"),
    "drpo": (["method=drpo"], OBSERVABLE),
}
DIAGNOSTICS = ["completions/mean_length", "reward/correct/mean", "reward/length/mean"]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods", DIAGNOSTICS)
