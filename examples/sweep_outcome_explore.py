"""Outcome-based exploration against GRPO on the tiny testbed, 3 seeds each (docs/methods/outcome-explore.md).

The abstract's claim is accuracy kept or improved with less diversity collapse: compare pass@1, and
read pipeline/advantage/distinct_answers (distinct answers per group; grpo does not write it) over
the steps of the outcome-explore runs.

python examples/sweep_outcome_explore.py --seeds 5  # 10 runs (the grpo ones are shared with the other method sweeps)
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")
OBSERVABLE = "pipeline/advantage/distinct_answers"
VARIANTS = {
    "grpo": (["method=grpo"], OBSERVABLE),
    # the preset divides by no std: a bonus stays its own size in a group whose correctness does not vary
    "outcome-explore": (["method=outcome-explore"], OBSERVABLE),
    "outcome-explore (scale std)": (["method=outcome-explore", "advantage.scale=std"], OBSERVABLE),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods")
