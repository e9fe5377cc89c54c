"""Rollout tokens per second of training: the asynchronous trainer against the synchronous one.

Every mode trains the long-tail testbed (examples/long-tail.yaml: `chain` with 3-6 operands, so
completion lengths have a long tail, median 12 tokens, tail to 39) for the same steps from one set
of warm-started weights (built once, saved to a directory, loaded by every mode), one process
driving, alternating the modes for --reps rounds. The figure is the rollout tokens decoded over the
wall time of the training loop (every step's generation, training and weight sync; not the model's
loading or the actors' placement, the same for every step count), so overlap counts and nothing is
hidden in a phase one mode has and the other does not.

Each side runs in every way that suits it on this machine and is reported at its best:
  synchronous:  in this process with 1 thread and with all of torch's threads; on Ray, a learner of
                1 thread and one rollout actor of 1 CPU (sampling and training take turns);
  asynchronous: schedule.max_staleness generation ahead of training, in this process (a rollout
                thread and the learner, 1 torch thread each, sharing the interpreter), and on Ray
                (one rollout actor and the learner, 1 CPU each, in two processes).

    python bench/async_vs_sync.py [--steps 30] [--reps 2] [--staleness 1]

Last line: {"bench": "async_vs_sync", "ours": tok/s, "peer": tok/s, "unit": "rollout tokens/s", "ratio": ours/peer}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTBED = REPO / "examples" / "long-tail.yaml"
ON_RAY = ["resources.executor=ray", "resources.rollout_actors=1", "resources.actor_cpus=1", "resources.threads=1"]


def save_warm_started(directory: Path, threads: int) -> None:
    """The testbed's warm-started tiny model (built once, or taken from the cache), saved where every mode loads it."""
    import torch

    from workers.config import load_config
    from workers.models.policy import load_policy
    from workers.tasks import build_task

    cfg = load_config(TESTBED, [f"resources.threads={threads}"])
    policy = load_policy(cfg, build_task(cfg), torch.device("cpu"))
    policy.model.save_pretrained(directory)
    policy.tokenizer.save_pretrained(directory)


def tokens_per_second(overrides: list[str]) -> float:
    """Train the testbed with these overrides; rollout tokens decoded per second of the training loop."""
    from workers import metrics as metric
    from workers.config import load_config
    from workers.distributed import run_on_ray
    from workers.reporting import MemoryReporter
    from workers.trainer import Trainer

    cfg = load_config(TESTBED, ["eval.every=0", "schedule.save_final=false", *overrides])
    reporter = MemoryReporter()
    if cfg.resources.executor == "ray":
        assert run_on_ray(cfg, reporter) == "succeeded"
    else:
        assert Trainer(cfg, reporter).run() == "succeeded"
    last = reporter.metric_rows[-1]
    return last[metric.ROLLOUT_TOKENS] / last[metric.WALL_S]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30, help="RL steps per run")
    parser.add_argument("--reps", type=int, default=2, help="rounds over every mode; medians are reported")
    parser.add_argument("--staleness", type=int, default=1, help="schedule.max_staleness of the asynchronous runs")
    options = parser.parse_args()
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    import ray
    import torch

    cores = torch.get_num_threads()
    ray.init(address="local", num_cpus=max(cores, 2), include_dashboard=False, logging_level="ERROR")
    with tempfile.TemporaryDirectory() as weights:
        save_warm_started(Path(weights), cores)
        common = [f"schedule.steps={options.steps}", f"model.name={weights}"]
        ahead = f"schedule.max_staleness={options.staleness}"
        modes = {
            "sync, 1 thread": [*common, "resources.threads=1"],
            f"sync, {cores} threads": [*common, f"resources.threads={cores}"],
            "sync on Ray, 1 actor": [*common, *ON_RAY],
            f"async (max_staleness {options.staleness}), 1 thread each": [*common, "resources.threads=1", ahead],
            f"async (max_staleness {options.staleness}) on Ray, 1 actor": [*common, *ON_RAY, ahead],
        }
        seen: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(options.reps):
            for mode, overrides in modes.items():
                seen[mode].append(tokens_per_second(overrides))
    ray.shutdown()
    medians = {mode: statistics.median(values) for mode, values in seen.items()}
    for mode, values in seen.items():
        print(f"{mode}: median {medians[mode]:,.0f} rollout tokens/s ({', '.join(f'{v:,.0f}' for v in values)})")
    ours = max(v for m, v in medians.items() if m.startswith("async"))
    peer = max(v for m, v in medians.items() if m.startswith("sync"))
    print(json.dumps({"bench": "async_vs_sync", "ours": ours, "peer": peer, "unit": "rollout tokens/s",
                      "ratio": ours / peer}))  # fmt: skip


if __name__ == "__main__":
    main()
