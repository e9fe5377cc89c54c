"""dapo, gspo and dr-grpo with their papers' update schedules against the testbed's two minibatches, 3 seeds each.

The presets now split each batch as their papers do (dapo 16, gspo 4, dr-grpo 8 minibatch
updates); "testbed schedule" is the same preset with the 2 minibatches of
examples/preset-corrections.yaml, as the cards were measured before (docs/methods/dapo.md,
gspo.md, dr-grpo.md). The base YAML sets no schedule, so each preset's own applies.
"lr x 2/M" is the paper's schedule with the learning rate divided as the minibatches multiply, so
that a batch moves the policy about as far as the testbed's 2 updates do: it tells the schedule's
own effect from that of taking M/2 times as many Adam steps at the testbed's rate.

    python examples/sweep_paper_schedules.py      # 27 runs
"""

from pathlib import Path

from _sweep import main

from workers import metrics

BASE = Path(__file__).with_name("paper-schedules.yaml")
TESTBED = "schedule.minibatches=2"
VARIANTS = {
    "dapo (16 minibatches)": (["method=dapo"], metrics.CLIP_RATIO_HIGH),
    "dapo, testbed schedule (2)": (["method=dapo", TESTBED], metrics.CLIP_RATIO_HIGH),
    "gspo (4 minibatches)": (["method=gspo"], metrics.CLIP_RATIO_HIGH),
    "gspo, testbed schedule (2)": (["method=gspo", TESTBED], metrics.CLIP_RATIO_HIGH),
    "dr-grpo (8 minibatches)": (["method=dr-grpo"], metrics.CLIP_RATIO_HIGH),
    "dr-grpo, testbed schedule (2)": (["method=dr-grpo", TESTBED], metrics.CLIP_RATIO_HIGH),
    "dapo (16 minibatches, lr x 2/16)": (["method=dapo", "optimizer.lr=2.5e-5"], metrics.CLIP_RATIO_HIGH),
    "gspo (4 minibatches, lr x 2/4)": (["method=gspo", "optimizer.lr=1e-4"], metrics.CLIP_RATIO_HIGH),
    "dr-grpo (8 minibatches, lr x 2/8)": (["method=dr-grpo", "optimizer.lr=5e-5"], metrics.CLIP_RATIO_HIGH),
}
DIAGNOSTICS = [metrics.ESS, metrics.TOKEN_RATIO_OUTSIDE, metrics.CLIP_RATIO_LOW, metrics.CLIP_RATIO_HIGH]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-paper-schedules", DIAGNOSTICS)
