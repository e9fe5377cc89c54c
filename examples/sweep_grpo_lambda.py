"""GRPO-lambda against GRPO, with and without the same length penalty, 3 seeds each (docs/methods/grpo-lambda.md).

The abstract's claim is about the plain length penalty: it shortens completions but makes accuracy
collapse, and the gate avoids that. So the sweep runs grpo on correctness alone, grpo with the
preset's length penalty in every group, and grpo-lambda; read pass@1 beside completions/mean_length.
On this testbed answers are 1-3 tokens of at most 8, so lengths vary little.

    python examples/sweep_grpo_lambda.py      # 9 runs (the plain grpo ones are shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
OBSERVABLE = "pipeline/advantage/penalty_gated_groups"
WEIGHTS = "reward.weights={correct: 1.0, length: 0.5}"
VARIANTS = {
    "grpo": (["method=grpo"], OBSERVABLE),
    "grpo (length penalty)": (["method=grpo", WEIGHTS], "reward/length/mean"),
    "grpo-lambda": (["method=grpo-lambda"], OBSERVABLE),
}
DIAGNOSTICS = ["completions/mean_length", "reward/correct/mean", "reward/length/mean"]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods", DIAGNOSTICS)
