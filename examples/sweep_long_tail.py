"""The length- and budget-aware methods on the long-tail testbed, 3 seeds each, one shared grpo base.

Cards: docs/methods/april.md, siri.md, rorecomp.md, duet.md, d3s.md (each also has its run on the
arith testbed, where every answer is 2-3 tokens and these methods have nothing to act on).

python examples/sweep_long_tail.py --target 0.8     # 24 runs, about 4 minutes each, two at a time
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("long-tail.yaml")
TOKENS_PER_S = "throughput/rollout_tokens_per_s"
LENGTH = "completions/mean_length"
VARIANTS = {
    "grpo": (["method=grpo"], TOKENS_PER_S),
    "april": (["method=april"], TOKENS_PER_S),
    "april, oversample 1.25": (["method=april", "generate.oversample=1.25"], TOKENS_PER_S),
    "siri without its schedule": (["method=siri", "control.name=fixed"], LENGTH),
    "siri 40 -> 20 -> 40, period 100": (["method=siri"], LENGTH),
    "rorecomp": (["method=rorecomp"], LENGTH),
    "duet": (["method=duet"], LENGTH),
    "d3s": (["method=d3s"], LENGTH),
}
DIAGNOSTICS = [
    TOKENS_PER_S,
    "timing/generate_s",
    LENGTH,
    "completions/max_length",
    "completions/clipped_ratio",
    "groups/frac_zero_std",
    "pipeline/generate/stopped_rows",
    "pipeline/generate/resumed_rows",
    "pipeline/control/max_new_tokens",
    "pipeline/control/aborted",
    "pipeline/replay/priority_samples",
    "pipeline/replay/compensation_samples",
    "pipeline/advantage/kept_tokens",
]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-long-tail", DIAGNOSTICS)
