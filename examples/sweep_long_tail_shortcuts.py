"""The length-aware methods where shorter derivations of one problem exist: 3 seeds each, one grpo base.

Cards: docs/methods/siri.md, rorecomp.md. The testbed (examples/long-tail-shortcuts.yaml) is the
long-tail one whose warm-start data skips steps in half its derivations.

python examples/sweep_long_tail_shortcuts.py --target 0.8     # 9 runs, about 4 minutes each, two at a time
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("long-tail-shortcuts.yaml")
LENGTH = "completions/mean_length"
VARIANTS = {
    "grpo": (["method=grpo"], LENGTH),
    "siri 40 -> 20 -> 40, period 100": (["method=siri"], LENGTH),
    "rorecomp": (["method=rorecomp"], LENGTH),
}
DIAGNOSTICS = [
    LENGTH,
    "completions/clipped_ratio",
    "pipeline/control/max_new_tokens",
    "pipeline/replay/priority_samples",
    "pipeline/replay/compensation_samples",
]

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-long-tail-shortcuts", DIAGNOSTICS)
