"""The Reporter: where a run's metrics, samples, logs, state and artifacts go.

The trainer calls a Reporter and never knows where the data ends up. The
platform's implementation writes to PostgreSQL and notifies browsers; the
ones here write JSONL files (`JsonlReporter`), draw a progress bar
(`ProgressReporter`), keep everything in memory (`MemoryReporter`, for tests
and notebooks) or fan out to several (`FanoutReporter`).

`should_stop()` is asked between the phases of every step: a reporter returns
True to cancel the run cooperatively.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from workers import metrics as metric
from workers import progress

# Metrics that measure the machine rather than the computation: they differ
# between two otherwise bit-identical runs and are left out of determinism checks.
NONDETERMINISTIC_PREFIXES = ("timing/", "throughput/", metric.WALL_S, "system/")


def is_deterministic_metric(name: str) -> bool:
    return not name.startswith(NONDETERMINISTIC_PREFIXES)


class Reporter(Protocol):
    def metrics(self, step: int, values: dict[str, float]) -> None: ...

    def samples(self, step: int, samples: list[dict[str, Any]]) -> None: ...

    def groups(self, step: int, groups: list[dict[str, Any]]) -> None: ...

    def log(self, line: str) -> None: ...

    def status(self, state: str, detail: str = "") -> None: ...

    def artifact(self, path: str, kind: str) -> None: ...

    def should_stop(self) -> bool: ...

    # optional: `flush()`, for a reporter that buffers: store everything reported so far. The trainer calls it
    # before a resume checkpoint, which claims that every step up to it is stored.


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def sha256_tree(path: Path) -> str:
    """A file's sha256, or for a directory the sha256 of its files' relative paths and hashes."""
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(path).as_posix()}\0{sha256_file(file)}\n".encode())
    return digest.hexdigest()


class JsonlReporter:
    """Writes metrics.jsonl, samples.jsonl, log.txt, status.jsonl and artifacts.jsonl into a directory.

    Stops the run when a file named STOP appears in the directory.
    """

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, Any] = {}

    def _append(self, name: str, text: str) -> None:
        if name not in self._files:
            self._files[name] = open(self.directory / name, "a", encoding="utf-8")
        handle = self._files[name]
        handle.write(text + "\n")
        handle.flush()

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self._append("metrics.jsonl", json.dumps({"step": step, **values}))

    def samples(self, step: int, samples: list[dict[str, Any]]) -> None:
        for sample in samples:
            self._append("samples.jsonl", json.dumps({"step": step, **sample}))

    def groups(self, step: int, groups: list[dict[str, Any]]) -> None:
        for group in groups:
            self._append("groups.jsonl", json.dumps({"step": step, **group}))

    def log(self, line: str) -> None:
        self._append("log.txt", line)

    def status(self, state: str, detail: str = "") -> None:
        self._append("status.jsonl", json.dumps({"state": state, "detail": detail, "time": time.time()}))

    def artifact(self, path: str, kind: str) -> None:
        target = Path(path)
        record = {"path": str(target), "kind": kind, "sha256": sha256_tree(target)}
        self._append("artifacts.jsonl", json.dumps(record))

    def should_stop(self) -> bool:
        return (self.directory / "STOP").exists()

    def forget_after(self, step: int) -> None:
        """Drop the metrics, samples and groups of the steps after `step` (a run resumed from its checkpoint of
        `step` reports them again): each is then stored once."""
        self.close()
        for name in ("metrics.jsonl", "samples.jsonl", "groups.jsonl"):
            path = self.directory / name
            if path.is_file():
                kept = [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                        if json.loads(line)["step"] <= step]  # fmt: skip
                path.write_text("".join(kept), encoding="utf-8")

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()


class MemoryReporter:
    """Keeps everything in lists; `stop_after` cancels the run once that many metric steps arrived."""

    def __init__(self, stop_after: int | None = None):
        self.metric_rows: list[dict[str, float]] = []
        self.sample_rows: list[dict[str, Any]] = []
        self.group_rows: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self.states: list[tuple[str, str]] = []
        self.artifacts: list[tuple[str, str]] = []
        self.stop_after = stop_after

    def metrics(self, step, values):
        self.metric_rows.append({"step": step, **values})

    def samples(self, step, samples):
        self.sample_rows.extend({"step": step, **s} for s in samples)

    def groups(self, step, groups):
        self.group_rows.extend({"step": step, **g} for g in groups)

    def log(self, line):
        self.lines.append(line)

    def status(self, state, detail=""):
        self.states.append((state, detail))

    def artifact(self, path, kind):
        self.artifacts.append((path, kind))

    def should_stop(self):
        return self.stop_after is not None and len(self.metric_rows) >= self.stop_after

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(row["step"], row[name]) for row in self.metric_rows if name in row]


class ProgressReporter:
    """A progress bar on stderr: step, reward, eval pass@1, rollout tokens/s and the ETA.

    The ETA is the run's own (workers.progress.time_left): the steps left at the training seconds a step takes,
    and the evaluations still due at the seconds the last one took, not tqdm's rate of wall time per step, which
    counts an evaluation as part of the step before it."""

    def __init__(self, total_steps: int, stream=sys.stderr, eval_every: int = 0):
        from tqdm import tqdm

        bar_format = "{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
        self.bar = tqdm(total=total_steps, file=stream, unit="step", dynamic_ncols=True, mininterval=0.5,
                        bar_format=bar_format)  # fmt: skip
        self.total, self.eval_every, self.eval_seconds = total_steps, eval_every, 0.0
        self.shown: dict[str, str] = {}

    def metrics(self, step, values):
        for name, label, fmt in (
            (metric.REWARD_MEAN, "reward", "{:.3f}"),
            (metric.PASS_AT_1, "pass@1", "{:.3f}"),
            (metric.ROLLOUT_TOKENS_PER_S, "tok/s", "{:.0f}"),
        ):
            if name in values:
                self.shown[label] = fmt.format(values[name])
        self.eval_seconds = values.get(metric.EVAL_S, self.eval_seconds)
        if step > 0 and values.get(metric.WALL_S):
            left = progress.time_left(step, self.total, values[metric.WALL_S] / step, self.eval_every,
                                      self.eval_seconds)  # fmt: skip
            self.shown["ETA"] = progress.duration(left)
        self.bar.set_postfix(self.shown, refresh=False)
        if step > self.bar.n:
            self.bar.update(step - self.bar.n)

    def samples(self, step, samples):
        pass

    def groups(self, step, groups):
        pass

    def log(self, line):
        self.bar.write(line, file=self.bar.fp)

    def status(self, state, detail=""):
        if state == "running":  # the phase and how far it got (workers.progress): redrawn in place, several a second
            self.bar.set_description_str(detail)
            return
        if state in ("succeeded", "failed", "cancelled"):
            self.bar.close()
        self.bar.write(f"[{state}] {detail}".rstrip(), file=self.bar.fp)

    def artifact(self, path, kind):
        pass

    def should_stop(self):
        return False


class FanoutReporter:
    """Sends every call to each reporter; stops when any of them says stop."""

    def __init__(self, *reporters: Reporter):
        self.reporters = reporters

    def metrics(self, step, values):
        for r in self.reporters:
            r.metrics(step, values)

    def samples(self, step, samples):
        for r in self.reporters:
            r.samples(step, samples)

    def groups(self, step, groups):
        for r in self.reporters:
            r.groups(step, groups)

    def log(self, line):
        for r in self.reporters:
            r.log(line)

    def status(self, state, detail=""):
        for r in self.reporters:
            r.status(state, detail)

    def artifact(self, path, kind):
        for r in self.reporters:
            r.artifact(path, kind)

    def should_stop(self):
        return any(r.should_stop() for r in self.reporters)

    def flush(self):
        for r in self.reporters:
            flush = getattr(r, "flush", None)
            if callable(flush):
                flush()


def read_metrics(path: Path) -> list[dict[str, float]]:
    """The rows of a metrics.jsonl file."""
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
