"""It learns: the full GRPO example, and how far held-out pass@1 rises within its time budget.

Runs `python -m workers run examples/grpo-arith.yaml` (1000 steps or 285 s of
training, whichever comes first) and compares eval/pass@1 (greedy, 500 held-out
problems) of the final policy with that of the warm-started model it began from.
The acceptance: the start lies in [0.10, 0.50] and the end is at least 0.25 higher.

    python bench/learning.py [--seed 0]

Last line: {"bench": "grpo_arith_learning", "ours": final pass@1, "peer": warm-started pass@1,
            "unit": "eval/pass@1", "ratio": final / start}
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    seed = parser.parse_args().seed
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run"
        command = [sys.executable, "-m", "workers", "run", "examples/grpo-arith.yaml", "--out", str(out),
                   "--no-progress", "--set", f"seed={seed}"]  # fmt: skip
        subprocess.run(command, check=True, cwd=REPO)
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [(r["step"], r["eval/pass@1"]) for r in rows if "eval/pass@1" in r]
    wall = max(r.get("counters/wall_s", 0.0) for r in rows)
    (_, start), (last_step, end) = evals[0], evals[-1]
    print("step  eval/pass@1")
    for step, value in evals:
        print(f"{step:>4}  {value:.3f}")
    verdict = "meets" if 0.10 <= start <= 0.50 and end - start >= 0.25 else "MISSES"
    print(f"seed {seed}: {start:.3f} -> {end:.3f} (+{end - start:.3f}) in {last_step} steps, {wall:.0f} s of training; "
          f"{verdict} the target (start in [0.10, 0.50], +0.25 within 300 s)")  # fmt: skip
    print(
        json.dumps(
            {"bench": "grpo_arith_learning", "ours": end, "peer": start, "unit": "eval/pass@1", "ratio": end / start}
        )
    )


if __name__ == "__main__":
    main()
