"""Rollout tokens per second of wall time: the asynchronous trainer against the synchronous one.

Both train the long-tail testbed (examples/long-tail.yaml: `chain` with 3-6 operands, so
completion lengths have a long tail, median 12 tokens, tail to 39) for the same steps from the
same warm-started model, one process, alternating sync / async for --reps rounds. The figure
is rollout tokens decoded over the wall time of the whole run (generation, training and weight
sync), so overlap counts and nothing is hidden in a phase the other mode does not have.

Each mode gets the thread count that suits it on this machine: the synchronous trainer is
timed with 1 and with all of torch's threads and reported at its faster one (the peer at its
best); the asynchronous one runs generation and training at once, one thread each.

    python bench/async_vs_sync.py [--steps 30] [--reps 2] [--staleness 1]

Last line: {"bench": "async_vs_sync", "ours": tok/s, "peer": tok/s, "unit": "rollout tokens/s", "ratio": ours/peer}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def tokens_per_second(overrides: list[str]) -> float:
    """Train the testbed with these overrides; rollout tokens decoded per second of the run's wall time."""
    from workers import metrics as metric
    from workers.config import load_config
    from workers.reporting import MemoryReporter
    from workers.trainer import Trainer

    cfg = load_config(REPO / "examples" / "long-tail.yaml", ["eval.every=0", *overrides])
    trainer = Trainer(cfg, MemoryReporter())  # builds (or loads the cached) warm-started model first
    began = time.perf_counter()
    assert trainer.run() == "succeeded"
    elapsed = time.perf_counter() - began
    return trainer.reporter.metric_rows[-1][metric.ROLLOUT_TOKENS] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30, help="RL steps per run")
    parser.add_argument("--reps", type=int, default=2, help="rounds of (sync, async) runs; medians are reported")
    parser.add_argument("--staleness", type=int, default=1, help="schedule.max_staleness of the asynchronous run")
    options = parser.parse_args()
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    import torch

    cores = torch.get_num_threads()
    steps = f"schedule.steps={options.steps}"
    modes = {
        "sync, 1 thread": [steps, "resources.threads=1"],
        f"sync, {cores} threads": [steps, f"resources.threads={cores}"],
        f"async (max_staleness {options.staleness}), 1 thread": [
            steps,
            "resources.threads=1",
            f"schedule.max_staleness={options.staleness}",
        ],
    }
    tokens_per_second(["schedule.steps=1"])  # builds and caches the warm-up model before anything is timed
    seen: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(options.reps):
        for mode, overrides in modes.items():
            seen[mode].append(tokens_per_second(overrides))
    medians = {mode: statistics.median(values) for mode, values in seen.items()}
    for mode, values in seen.items():
        print(f"{mode}: median {medians[mode]:,.0f} rollout tokens/s ({', '.join(f'{v:,.0f}' for v in values)})")
    ours = medians[next(m for m in modes if m.startswith("async"))]
    peer = max(v for m, v in medians.items() if m.startswith("sync"))
    print(json.dumps({"bench": "async_vs_sync", "ours": ours, "peer": peer, "unit": "rollout tokens/s",
                      "ratio": ours / peer}))  # fmt: skip


if __name__ == "__main__":
    main()
