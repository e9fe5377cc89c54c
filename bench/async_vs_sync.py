"""Rollout tokens per second of training: the asynchronous trainer against the synchronous one.

Every mode trains the long-tail testbed (examples/long-tail.yaml: `chain` with 3-6 operands, so
completion lengths have a long tail, median 12 tokens, tail to 39) for the same steps from one set
of warm-started weights (built once, saved to a directory, loaded by every mode), one process
driving, alternating the modes for --reps rounds (each round's Ray modes last, under a cluster started
for them and stopped after, so that its idle daemons take no core from the modes run in this process).
The figure is the rollout tokens decoded over the wall time of the training loop (every step's
generation, training and weight sync; not the model's loading or the actors' placement, the same for
every step count), so overlap counts and nothing is hidden in a phase one mode has and the other does
not.

Each side runs in every way that suits it on this machine and is reported at its best:
  synchronous:  in this process with 1 thread and with all of torch's threads; on Ray, a learner of
                1 thread and one rollout actor of 1 CPU (sampling and training take turns);
  asynchronous: schedule.max_staleness generation ahead of training, in this process (a rollout
                thread and the learner, 1 torch thread each, sharing the interpreter), and on Ray
                (one rollout actor and the learner, 1 CPU each, in two processes).

On a machine of more cores, the asynchronous modes also run with half of them on each side. With
--device cuda (a GPU machine) every mode trains and samples on the GPU: in this process the rollout
copy and the learner share it; on Ray the learner holds half of it and the rollout actor the other.

Every mode, on both sides, does the same learner's work: it forwards its training rows in
--length-buckets buckets of similar length (schedule.length_buckets), and its ratios are taken against
the sampler's own log-probabilities (objective.old_logprobs=sampler: a float32 hf policy on this
machine's device gives the learner's numbers; left at auto, a run on Ray would recompute them with an
extra forward that no in-process mode pays).

The warm-started weights take minutes to build on one core. --save-weights DIR builds them, saves them
to DIR and exits; --weights DIR then loads them instead of building them: a GPU machine lent for a
few minutes gets them carried in from here.

    python bench/async_vs_sync.py [--steps 30] [--reps 2] [--staleness 1] [--device cpu|cuda] [--length-buckets 4]
                                  [--weights DIR | --save-weights DIR]

Last line: {"bench": "async_vs_sync", "ours": tok/s, "peer": tok/s, "unit": "rollout tokens/s", "ratio": ours/peer,
"round_ratios": [the same ratio within each round]}
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
ON_GPU = ["resources.device=cuda", "resources.gpus=1"]
ON_RAY_GPU = ["resources.learner_gpus=0.5", "resources.actor_gpus=0.5"]


def modes(cores: int, device: str, ahead: str) -> dict[str, list[str]]:
    """Every way each side runs on this machine, by name: the synchronous ones start with "sync"."""
    if device == "cuda":
        return {
            "sync on the GPU": ON_GPU,
            "sync on Ray, 1 actor, GPU halves": [*ON_RAY, *ON_GPU, *ON_RAY_GPU],
            "async on the GPU": [*ON_GPU, ahead],
            "async on Ray, 1 actor, GPU halves": [*ON_RAY, *ON_GPU, *ON_RAY_GPU, ahead],
        }
    found = {
        "sync, 1 thread": ["resources.threads=1"],
        f"sync, {cores} threads": [f"resources.threads={cores}"],
        "sync on Ray, 1 actor": ON_RAY,
        "async, 1 thread each": ["resources.threads=1", ahead],
        "async on Ray, 1 actor": [*ON_RAY, ahead],
    }
    if cores >= 4:  # room for more than a thread a side
        half = cores // 2
        found[f"async, {half} threads each"] = [f"resources.threads={half}", ahead]
        found[f"async on Ray, 1 actor of {half} CPUs"] = [
            *ON_RAY, f"resources.actor_cpus={half}", f"resources.threads={half}", ahead
        ]  # fmt: skip
    # on the CPU even where a GPU is present (resources.device defaults to auto, which would take it)
    return {mode: ["resources.device=cpu", *overrides] for mode, overrides in found.items()}


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


def tokens_per_second(overrides: list[str]) -> tuple[float, dict[str, float]]:
    """Train the testbed with these overrides; rollout tokens decoded per second of the training loop, and the
    mean seconds of each phase of a step (timing/*) over the steps after the first two (warm-up), or over every
    step of a shorter run."""
    from workers import metrics as metric
    from workers.config import load_config
    from workers.reporting import MemoryReporter
    from workers.training.distributed import run_on_ray
    from workers.training.trainer import Trainer

    cfg = load_config(TESTBED, ["eval.every=0", "schedule.save_final=false", *overrides])
    reporter = MemoryReporter()
    if cfg.resources.executor == "ray":
        assert run_on_ray(cfg, reporter) == "succeeded"
    else:
        assert Trainer(cfg, reporter).run() == "succeeded"
    rows, last = reporter.metric_rows[2:] or reporter.metric_rows, reporter.metric_rows[-1]
    names = (metric.GENERATE_S, metric.TRAIN_S, metric.SYNC_S, metric.STEP_S)
    phases = {name: statistics.mean(row[name] for row in rows) for name in names}
    return last[metric.ROLLOUT_TOKENS] / last[metric.WALL_S], phases


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30, help="RL steps per run")
    parser.add_argument("--reps", type=int, default=2, help="rounds over every mode; medians are reported")
    parser.add_argument("--staleness", type=int, default=1, help="schedule.max_staleness of the asynchronous runs")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where every mode trains and samples")
    parser.add_argument("--length-buckets", type=int, default=4, help="schedule.length_buckets of every mode")
    made = parser.add_mutually_exclusive_group()
    made.add_argument("--weights", type=Path, help="load the warm-started weights from this directory")
    made.add_argument("--save-weights", type=Path, help="build the warm-started weights into this directory, exit")
    return parser.parse_args()


def ray_or_none():
    """Ray, or None where it is not installed: the in-process modes need only torch (a lent GPU machine may
    have nothing else carried in)."""
    try:
        import ray
    except ImportError:
        return None
    return ray


def runnable(ways: dict[str, list[str]], ray) -> dict[str, list[str]]:
    """The modes this process can run: without Ray, the in-process ones."""
    if ray is not None:
        return ways
    return {mode: overrides for mode, overrides in ways.items() if ON_RAY[0] not in overrides}


def run_rounds(ways: dict[str, list[str]], common: list[str], reps: int, cores: int, ray):
    """Every mode `reps` times, in rounds; each mode's rollout tokens/s and phase timings, one per round."""
    seen: dict[str, list[float]] = {mode: [] for mode in ways}
    timings: dict[str, list[dict[str, float]]] = {mode: [] for mode in ways}
    for _ in range(reps):
        # the Ray modes last, each round under a cluster of its own: its idle daemons take a share of the
        # cores, which the modes in this process must not pay for
        for mode, overrides in sorted(ways.items(), key=lambda way: ON_RAY[0] in way[1]):
            if ON_RAY[0] in overrides and not ray.is_initialized():
                ray.init(address="local", num_cpus=max(cores, 2), include_dashboard=False, logging_level="ERROR")
            rate, phases = tokens_per_second([*common, *overrides])
            seen[mode].append(rate)
            timings[mode].append(phases)
        if ray is not None:
            ray.shutdown()
    return seen, timings


def report(seen: dict[str, list[float]], timings: dict[str, list[dict[str, float]]]) -> None:
    """Each mode's median and rounds, its phases; last, each side at its best, as the usual JSON line."""
    medians = {mode: statistics.median(values) for mode, values in seen.items()}
    for mode, values in seen.items():
        print(f"{mode}: median {medians[mode]:,.0f} rollout tokens/s ({', '.join(f'{v:,.0f}' for v in values)})")
        phases = {name: statistics.median(t[name] for t in timings[mode]) for name in timings[mode][0]}
        shown = ", ".join(f"{name.removeprefix('timing/')} {v:.3f}" for name, v in phases.items())
        print(f"    median of the runs' mean s/step: {shown}")
    ours, peer = best_of_each_side(medians)
    # the same ratio within each round, whose runs are minutes apart at most: a machine whose speed drifts
    # over a longer time shows it as a spread here
    count = len(next(iter(seen.values())))
    each_round = [best_of_each_side({mode: values[i] for mode, values in seen.items()}) for i in range(count)]
    round_ratios = [round(a / s, 3) for a, s in each_round]
    print(f"each round's best async / best sync: {round_ratios}")
    print(json.dumps({"bench": "async_vs_sync", "ours": ours, "peer": peer, "unit": "rollout tokens/s",
                      "ratio": ours / peer, "round_ratios": round_ratios}))  # fmt: skip


def best_of_each_side(rates: dict[str, float]) -> tuple[float, float]:
    """The asynchronous side's best rate and the synchronous side's."""
    best = lambda side: max(v for m, v in rates.items() if m.startswith(side))  # noqa: E731
    return best("async"), best("sync")


def main() -> None:
    options = parse_options()
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(REPO / ".cache" / "rolloutlab"))
    import torch

    cores = torch.get_num_threads()
    if options.save_weights:
        save_warm_started(options.save_weights, cores)
        print(f"warm-started weights saved to {options.save_weights}")
        return
    ray = ray_or_none()
    ways = runnable(modes(cores, options.device, f"schedule.max_staleness={options.staleness}"), ray)
    print(f"{cores} CPU threads, device {options.device}, max_staleness {options.staleness}, "
          f"{options.steps} steps, {options.length_buckets} length buckets"
          f"{'' if ray else '; Ray is not installed: its modes are left out'}")  # fmt: skip
    with tempfile.TemporaryDirectory() as built:
        weights = options.weights or Path(built)
        if not options.weights:
            save_warm_started(weights, cores)
        common = [f"schedule.steps={options.steps}", f"model.name={weights}", "objective.old_logprobs=sampler"]
        common.append(f"schedule.length_buckets={options.length_buckets}")
        seen, timings = run_rounds(ways, common, options.reps, cores, ray)
    report(seen, timings)


if __name__ == "__main__":
    main()
