"""Off-policy stress from staleness: the asynchronous trainer at schedule.max_staleness 1, 2 and 4, each objective.

Every batch trains k policy versions after the one that sampled it (k = max_staleness), so every row of the
loss is stale: the regime GSPO, MinPRO, VCPO and FiberPO were made for, and where a stale row gets the decoupled
correction (its clip against the learner before the step, its weight pi_prox / pi_behaviour). PPO-EWMA, the
Missing-Old-Logits repair, clips against an average of the recent weights instead. Every variant runs the
testbed's schedule (one pass of two minibatches), laid over each preset's own (--set wins), so the objectives
and the staleness alone differ (docs/methods/gspo.md, minpro.md, vcpo.md, fiberpo.md, ppo-ewma.md).

    python examples/sweep_offpolicy_async.py --seeds 5      # 90 runs
"""

from pathlib import Path

from _sweep import main

from workers import metrics

BASE = Path(__file__).with_name("preset-corrections.yaml")
SCHEDULE = ["schedule.minibatches=2", "schedule.updates_per_batch=1"]
OBJECTIVES = {
    "grpo": metrics.CLIP_RATIO_HIGH,
    "gspo": metrics.CLIP_RATIO_HIGH,
    "minpro": metrics.PREFIX_MIN_BELOW_TOKEN,
    "vcpo": metrics.STEP_SCALE,
    "fiberpo": metrics.SEQUENCE_GATED,
    "ppo-ewma": metrics.PROXIMAL_LAG,
}
VARIANTS = {
    f"{method}, max_staleness {k}": ([f"method={method}", *SCHEDULE, f"schedule.max_staleness={k}"], observable)
    for k in (1, 2, 4)
    for method, observable in OBJECTIVES.items()
}
DIAGNOSTICS = [
    metrics.ASYNC_STALENESS_MEAN,
    metrics.STALE_IS_WEIGHT_MEAN,
    metrics.STALE_IS_OVER_BOUND,
    metrics.ESS,
    metrics.TOKEN_RATIO_OUTSIDE,
    metrics.CLIP_RATIO_LOW,
    metrics.CLIP_RATIO_HIGH,
]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-offpolicy-async", DIAGNOSTICS)
