"""Each corrected preset against its previous behaviour on the tiny testbed, 3 seeds each.

    python examples/preset_corrections.py [--seeds 3] [--parallel 2] [--out runs/preset-corrections]

Runs every (variant, seed) of VARIANTS with the CLI on examples/preset-corrections.yaml, two at a
time (each on one thread), then prints per variant the held-out pass@1 (the mean of the last three
evals, 1,000 problems each) as IQM with its 95% stratified-bootstrap interval, and the observable
that the correction moves. A run directory that already holds its metrics is not run again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from rolloutlab.compare.stats import interval, iqm

BASE = Path(__file__).with_name("preset-corrections.yaml")

# name -> (overrides, the observable to report)
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
        ],
        "advantage/abs_mean",
    ),
}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-").replace("--", "-")


def run(out: Path, overrides: list[str], seed: int) -> Path:
    if (out / "metrics.jsonl").is_file() and any('"state": "succeeded"' in line for line in _states(out)):
        return out
    command = [sys.executable, "-m", "workers", "run", str(BASE), "--out", str(out), "--set", f"seed={seed}"]
    for assignment in overrides:
        command += ["--set", assignment]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return out


def _states(out: Path) -> list[str]:
    path = out / "status.jsonl"
    return path.read_text().splitlines() if path.is_file() else []


def read_metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def summarize(rows: list[dict], observable: str) -> tuple[float, float, float, float]:
    """(pass@1 at step 0, mean pass@1 of the last three evals, mean of the observable over the steps,
    rollout tokens of the whole run)."""
    evals = [r["eval/pass@1"] for r in rows if "eval/pass@1" in r]
    observed = [r[observable] for r in rows if observable in r]
    tokens = max(r.get("counters/rollout_tokens", 0.0) for r in rows)
    return evals[0], float(np.mean(evals[-3:])), float(np.mean(observed)), tokens


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/preset-corrections"))
    args = parser.parse_args()
    jobs = [(name, seed) for name in VARIANTS for seed in range(args.seeds)]
    with ThreadPoolExecutor(args.parallel) as pool:
        outs = list(
            pool.map(lambda job: run(args.out / f"{slug(job[0])}-s{job[1]}", VARIANTS[job[0]][0], job[1]), jobs)
        )
    results: dict[str, list[tuple[float, float, float, float]]] = {}
    for (name, _), out in zip(jobs, outs):
        results.setdefault(name, []).append(summarize(read_metrics(out), VARIANTS[name][1]))
    print("| variant | pass@1 at 0 | final pass@1, IQM [95% CI] | per seed | rollout tokens | observable |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, rows in results.items():
        finals = np.array([[r[1]] for r in rows])
        low, high = interval(finals, iqm)
        seeds = " / ".join(f"{r[1]:.3f}" for r in rows)
        observed, tokens = np.mean([r[2] for r in rows]), np.mean([r[3] for r in rows])
        print(
            f"| {name} | {rows[0][0]:.3f} | {iqm(finals):.3f} [{low:.3f}, {high:.3f}] | {seeds} | "
            f"{tokens / 1e3:.0f} k | `{VARIANTS[name][1]}` {observed:.3f} |"
        )


if __name__ == "__main__":
    main()
