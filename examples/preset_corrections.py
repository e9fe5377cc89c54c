"""Each corrected preset against its previous behaviour on the tiny testbed, 3 seeds each.

    python examples/preset_corrections.py [--seeds 3] [--parallel 2] [--out runs/preset-corrections]

The figures are in docs/methods/dapo.md, rloo.md and mc-grpo.md ("Measured").
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("preset-corrections.yaml")

# label -> (overrides on the base config, the observable the correction moves)
VARIANTS = {
    "dapo (filter.signal=correct)": (["method=dapo"], "pipeline/filter/dropped_groups"),
    "dapo, before (filter.signal=reward)": (["method=dapo", "filter.signal=reward"], "pipeline/filter/dropped_groups"),
    "rloo (aggregation=sequence-sum)": (["method=rloo"], "completions/mean_length"),
    "rloo, before (aggregation=sequence-mean)": (
        ["method=rloo", "objective.aggregation=sequence-mean"],
        "completions/mean_length",
    ),
    "mc-grpo G=2 (scale=mad, rescale)": (["method=mc-grpo", "rollout.group_size=2"], "advantage/abs_mean"),
    "mc-grpo G=2, before (scale=std)": (
        [
            "method=mc-grpo",
            "rollout.group_size=2",
            "advantage.scale=std",
            "advantage.eps=0.0001",
            "advantage.rescale_nonzero=false",
        ],  # fmt: skip
        "advantage/abs_mean",
    ),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/preset-corrections")
