"""Off-policy stress: GRPO's token ratio against GSPO, MinPRO, VCPO, FiberPO and PPO-EWMA.

Every variant runs the same schedule, 4 minibatches x 2 passes per batch: 8 optimizer steps per
batch, of which 7 train on samples an older policy drew (docs/methods/minpro.md, vcpo.md, gspo.md,
fiberpo.md).
The schedule is laid over each preset's own (--set wins), so the objectives alone differ.

    python examples/sweep_offpolicy.py --seeds 5      # 35 runs
    (examples/sweep_offpolicy_async.py: the same objectives on stale batches from the asynchronous trainer)
"""

from pathlib import Path

from _sweep import main

from workers import metrics

BASE = Path(__file__).with_name("preset-corrections.yaml")
STRESS = ["schedule.minibatches=4", "schedule.updates_per_batch=2"]
VARIANTS = {
    "grpo": (["method=grpo", *STRESS], metrics.CLIP_RATIO_HIGH),
    "gspo": (["method=gspo", *STRESS], metrics.CLIP_RATIO_HIGH),
    "minpro": (["method=minpro", *STRESS], metrics.PREFIX_MIN_BELOW_TOKEN),
    # the component's form before the paper's was read: the running minimum in place of the token's own ratio
    "minpro (inclusive, the former form)": (
        ["method=minpro", "objective.prefix=inclusive", *STRESS],
        metrics.PREFIX_MIN_BELOW_TOKEN,
    ),
    "vcpo": (["method=vcpo", *STRESS], metrics.STEP_SCALE),
    "fiberpo": (["method=fiberpo", *STRESS], metrics.SEQUENCE_GATED),
    "ppo-ewma": (["method=ppo-ewma", *STRESS], metrics.PROXIMAL_LAG),
}
DIAGNOSTICS = [
    metrics.ESS,
    metrics.TOKEN_RATIO_MAX,
    metrics.TOKEN_RATIO_MIN,
    metrics.TOKEN_RATIO_OUTSIDE,
    metrics.CLIP_RATIO_LOW,
    metrics.CLIP_RATIO_HIGH,
    metrics.RESIDUAL_GATED,
]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-offpolicy", DIAGNOSTICS)
