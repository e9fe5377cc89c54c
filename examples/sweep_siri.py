"""SIRI against the same trainer without its length schedule, 3 seeds each (docs/methods/siri.md).

python examples/sweep_siri.py      # 6 runs, about 15 minutes on two CPU cores
"""

from pathlib import Path

from _sweep import main

BASE = Path(__file__).with_name("countdown-length.yaml")
LENGTH = "completions/mean_length"
VARIANTS = {
    "fixed limit 12 (siri's objective, no schedule)": (["method=siri", "control.name=fixed"], LENGTH),
    "siri 12 -> 6 -> 12, period 100": (["method=siri", "control.short=6", "control.period=100"], LENGTH),
}

if __name__ == "__main__":
    main(BASE, VARIANTS, "runs/sweep-siri")
