"""FiberPO against GRPO on the tiny testbed, both at FiberPO's 4 minibatch updates per batch, 3 seeds each.

docs/methods/fiberpo.md. The base YAML splits each batch in 2; both variants are set to the preset's
4, so that they differ only in the gate (on-policy FiberPO is GRPO). The off-policy stress sweep
(examples/sweep_offpolicy.py) compares it with GSPO, MinPRO and VCPO as well.

    python examples/sweep_fiberpo.py      # 6 runs
"""

from pathlib import Path

from _sweep import main

from workers import metrics

BASE = Path(__file__).with_name("preset-corrections.yaml")
SCHEDULE = "schedule.minibatches=4"
VARIANTS = {
    "grpo (4 minibatches)": (["method=grpo", SCHEDULE], metrics.CLIP_RATIO_HIGH),
    "fiberpo": (["method=fiberpo", SCHEDULE], metrics.SEQUENCE_GATED),
}
DIAGNOSTICS = [metrics.ESS, metrics.SEQUENCE_GATED, metrics.RESIDUAL_GATED, metrics.CLIP_RATIO_LOW,
               metrics.CLIP_RATIO_HIGH]  # fmt: skip

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-methods", DIAGNOSTICS)
