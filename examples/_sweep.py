"""Shared by the sweeps in examples/: run (variant, seed) pairs with the CLI, then summarise them.

A sweep module defines VARIANTS = {label: (overrides, observable)} over a base YAML and calls
`main(BASE, VARIANTS)`. Runs go two at a time, one thread each. A run directory that already
holds a succeeded run is not run again and one stopped part way goes on from its last resume
checkpoint, so an interrupted sweep picks up where it stopped; `--only TEXT` runs the variants
whose label contains TEXT (a part now, the rest later). Per variant it prints held-out pass@1
(the mean of the last three evals after step 0) as IQM with its 95% stratified-bootstrap
interval, the rollout tokens spent, the tokens until pass@1 first reached --target, and the
observable averaged over each run's steps, or an evaluation's at the run's last (IQM over the runs, with its
interval).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from rolloutlab.compare.stats import interval, iqm
from workers.bundle import bundle_run_dir, read_bundle
from workers.training.checkpoint import latest_checkpoint


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-").replace("--", "-")


def run(base: Path, out: Path, overrides: list[str], seed: int) -> Path:
    status = out / "status.jsonl"
    if status.is_file() and '"state": "succeeded"' in status.read_text():
        return out
    if (out / "config.yaml").is_file() and latest_checkpoint(out) is not None:
        # a run the last, interrupted sweep left unfinished: it goes on from its last resume checkpoint, with the
        # config it saved, and ends as the undisturbed run would have (tests/offline/engine/test_cli.py)
        command = [sys.executable, "-m", "workers", "run", "--resume", "--out", str(out), "--no-progress"]
    else:
        if out.exists():  # stopped before its first checkpoint: the CLI takes only a fresh directory
            shutil.rmtree(out)
        command = [sys.executable, "-m", "workers", "run", str(base), "--out", str(out), "--no-progress",
                   "--set", f"seed={seed}"]  # fmt: skip
        for assignment in overrides:
            command += ["--set", assignment]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return out


def read_metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def summarize(rows: list[dict], observable: str, target: float) -> dict[str, float]:
    evals = [r for r in rows if "eval/pass@1" in r]
    trained = [r for r in evals if r["step"] > 0] or evals  # a run evaluated only at its start and end: the end
    tokens = {r["step"]: r.get("counters/rollout_tokens", 0.0) for r in rows}
    reached = next((tokens.get(r["step"], 0.0) for r in evals if r["eval/pass@1"] >= target), float("nan"))
    return {
        "start": evals[0]["eval/pass@1"],
        "final": float(np.mean([r["eval/pass@1"] for r in trained[-3:]])),
        "observed": observed(rows, observable),
        "tokens": max(tokens.values()),
        "to_target": reached,
    }


def steps_of(rows: list[dict]) -> list[dict]:
    """A run's training steps (its evaluation-only rows left out)."""
    return [r for r in rows if r["step"] > 0 and "completions/mean_length" in r]


def step_mean(metric: str, last: int | None = None) -> Callable[[list[dict]], float]:
    """A step metric's mean over the run's steps (over its last `last` steps); nan where the run never wrote it
    (the variant has no such stage, e.g. the base)."""

    def value(rows: list[dict]) -> float:
        seen = [r[metric] for r in steps_of(rows) if metric in r]
        seen = seen[-last:] if last else seen
        return float(np.mean(seen)) if seen else float("nan")

    return value


def at_end(metric: str) -> Callable[[list[dict]], float]:
    """An evaluation's figure at the run's last evaluation; nan where the run never wrote it."""
    return lambda rows: next((float(r[metric]) for r in reversed(rows) if metric in r), float("nan"))


def observed(rows: list[dict], observable: str) -> float:
    """The observable's mean over the run's steps; an evaluation's (eval/...) at the last evaluation."""
    return (at_end if observable.startswith("eval/") else step_mean)(observable)(rows)


def with_interval(values: np.ndarray) -> str:
    """IQM [95% stratified-bootstrap interval] of (runs, 1) values."""
    low, high = interval(values, iqm)
    return f"{iqm(values):.3f} [{low:.3f}, {high:.3f}]"


def print_diagnostics(results_rows: dict[str, list[list[dict]]], names: list[str]) -> None:
    """Per variant and metric: the mean over every logged step of every seed, and the range the steps spanned."""
    print("\n| variant | " + " | ".join(f"`{n}` mean [step min, step max]" for n in names) + " |")
    print("| --- |" + " --- |" * len(names))
    for variant, runs in results_rows.items():
        cells = []
        for name in names:
            seen = np.array([r[name] for rows in runs for r in rows if name in r], dtype=float)
            cells.append("—" if seen.size == 0 else f"{seen.mean():.4f} [{seen.min():.4f}, {seen.max():.4f}]")
        print(f"| {variant} | " + " | ".join(cells) + " |")


def main(
    base: Path,
    variants: dict[str, tuple[list[str], str]],
    default_out: str,
    diagnostics: list[str] | None = None,
    record: Path | None = None,
) -> None:
    """record: a directory kept with the code, where each finished run's bundle is written and read back, so that a
    sweep spread over sittings on different machines counts the runs of the earlier ones (and anyone can import
    them into the platform: `python manage.py import_bundle FILE`)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.45, help="pass@1 whose first reaching is timed in tokens")
    parser.add_argument("--out", type=Path, default=Path(default_out))
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the variants whose label contains TEXT (repeat: any of them)")  # fmt: skip
    args = parser.parse_args()
    if args.only:  # a part of a sweep: its runs land where the whole sweep's would, so it can be completed later
        variants = {name: v for name, v in variants.items() if any(text in name for text in args.only)}
        if not variants:
            parser.error(f"--only {args.only} matches no variant")
    jobs = [(name, seed) for name in variants for seed in range(args.seeds)]

    def metric_rows(job: tuple[str, int]) -> list[dict]:
        """The run's metrics: from its bundle in `record` if a sitting before this one finished it, else run."""
        label = f"{slug(job[0])}-s{job[1]}"
        bundle = record / f"{label}.zip" if record is not None else None
        if bundle is not None and bundle.is_file():
            return read_bundle(bundle).metric_rows()
        out = run(base, args.out / label, variants[job[0]][0], job[1])
        if bundle is not None:
            bundle.parent.mkdir(parents=True, exist_ok=True)
            bundle_run_dir(out, bundle)
        return read_metrics(out)

    with ThreadPoolExecutor(args.parallel) as pool:
        all_rows = list(pool.map(metric_rows, jobs))
    results: dict[str, list[dict[str, float]]] = {}
    rows_by_variant: dict[str, list[list[dict]]] = {}
    for (name, _), rows in zip(jobs, all_rows):
        rows_by_variant.setdefault(name, []).append(rows)
        results.setdefault(name, []).append(summarize(rows, variants[name][1], args.target))
    print(f"| variant | pass@1 at 0 | final pass@1, IQM [95% CI] | per seed | rollout tokens | "
          f"tokens to pass@1 ≥ {args.target} | observable |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, rows in results.items():
        finals = np.array([[r["final"]] for r in rows])
        low, high = interval(finals, iqm)
        reached = [r["to_target"] for r in rows]
        to_target = " / ".join("never" if np.isnan(t) else f"{t / 1e3:.0f} k" for t in reached)
        seeds = " / ".join(f"{r['final']:.3f}" for r in rows)
        tokens = np.mean([r["tokens"] for r in rows]) / 1e3
        observed = np.array([[r["observed"]] for r in rows])  # nan: the variant never writes it (e.g. the base)
        shown = "—" if np.isnan(observed).any() else with_interval(observed)
        print(
            f"| {name} | {rows[0]['start']:.3f} | {iqm(finals):.3f} [{low:.3f}, {high:.3f}] | {seeds} | "
            f"{tokens:.0f} k | {to_target} | `{variants[name][1]}` {shown} |"
        )
    if diagnostics:
        print_diagnostics(rows_by_variant, diagnostics)
