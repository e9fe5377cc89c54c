"""Resume checkpoints: the whole state of a synchronous run after a step, so that a run stopped anywhere goes on,
on any worker that sees its artifacts, and produces the metric stream it would have produced undisturbed (on CPU,
bit for bit).

    point = latest_checkpoint(artifacts_dir)      # None before the first one
    Trainer(cfg, reporter, artifacts_dir).run(resume=point)

A checkpoint holds what the trainer's next step reads: the weights, the optimizer's moments, every random stream
(the global ones, the data, sampling and shuffle generators), the prompt history, every stage component's own state
(replay buffers, a control stage's estimates, partial rollouts), the counters, the fingerprint of the data drawn so
far and the step. The learning-rate schedule is a function of the step, so it needs nothing. The frozen reference
policy is the run's initial weights, which the trainer loads again; so is the tokenizer.

The components are saved whole (pickled), so a new component's state needs no code here; the config objects they
keep are not state and are not saved: each is saved as its path in the config and, on load, is the same object of
the resumed trainer's config (which must have the same hash). Files are written under a temporary name and renamed,
so a worker killed mid-write leaves the previous checkpoint intact; only the newest is kept.
"""

from __future__ import annotations

import importlib
import io
import os
import pickle
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from pydantic import BaseModel

DIRECTORY = "resume"  # under the run's artifacts directory
FORMAT = 1
_NAME = re.compile(r"^step-(\d{8})\.pt$")

# parameters -> steps between checkpoints: a checkpoint is about 3 x 4 bytes per parameter (weights and Adam's two
# moments), so a big model's takes tens of seconds to write and is spread out further; a tiny one's costs
# milliseconds, and losing 10 steps of it costs seconds
AUTO_INTERVALS = ((100_000_000, 10), (1_000_000_000, 25))
AUTO_INTERVAL_LARGE = 50


@dataclass(frozen=True)
class ResumePoint:
    """A checkpoint on disk: the last step it completed, and its file."""

    step: int
    path: Path


def checkpoint_interval(configured: int | None, parameters: int) -> int:
    """Steps between checkpoints: the knob's value, or (unset) the default for a model of `parameters`."""
    if configured is not None:
        return configured
    return next((every for limit, every in AUTO_INTERVALS if parameters < limit), AUTO_INTERVAL_LARGE)


def latest_checkpoint(artifacts_dir: Path | str | None) -> ResumePoint | None:
    """The newest complete checkpoint of a run's artifacts directory, or None."""
    if artifacts_dir is None:
        return None
    points = []
    for file in (Path(artifacts_dir) / DIRECTORY).glob("step-*.pt"):
        if match := _NAME.match(file.name):
            points.append(ResumePoint(int(match.group(1)), file))
    return max(points, key=lambda p: p.step, default=None)


def write_checkpoint(artifacts_dir: Path, step: int, state: dict) -> ResumePoint:
    """Write `state` as the checkpoint of `step`, atomically, then remove the older ones."""
    directory = Path(artifacts_dir) / DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"step-{step:08d}.pt"
    partial = path.with_suffix(".pt.partial")
    with open(partial, "wb") as file:
        torch.save({"format": FORMAT, "step": step, **state}, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)  # a reader sees the whole file or none
    for older in directory.glob("step-*.pt"):
        if older != path:
            older.unlink(missing_ok=True)
    return ResumePoint(step, path)


def discard(artifacts_dir: Path) -> None:
    """Remove a run's resume checkpoints (once it has finished: weights and optimizer state of a big model are
    tens of gigabytes)."""
    shutil.rmtree(Path(artifacts_dir) / DIRECTORY, ignore_errors=True)


def read_checkpoint(point: ResumePoint, device: torch.device) -> dict:
    """A checkpoint's state. Pickled, so only ever a run's own files: the worker wrote them itself."""
    state = torch.load(point.path, map_location=device, weights_only=False)
    if state.get("format") != FORMAT:
        raise ValueError(f"{point.path}: checkpoint format {state.get('format')}, this worker reads {FORMAT}")
    return state


# ------------------------------------------------------------------ the stage components
def config_objects(cfg: BaseModel) -> dict[str, BaseModel]:
    """Every config object inside `cfg` (itself included, as ""), by its dotted path."""
    found: dict[str, BaseModel] = {}

    def visit(value, path: str) -> None:
        if isinstance(value, BaseModel):
            found[path] = value
            for name in type(value).model_fields:
                visit(getattr(value, name), f"{path}.{name}" if path else name)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{path}[{key!r}]")

    visit(cfg, "")
    return found


class _ComponentPickler(pickle.Pickler):
    """Pickles the components; an object of the run's config is written as its path in the config."""

    def __init__(self, file, cfg: BaseModel):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.paths = {id(obj): path for path, obj in reversed(config_objects(cfg).items())}  # the first path wins

    def persistent_id(self, obj):
        return self.paths.get(id(obj)) if isinstance(obj, BaseModel) else None


class _ComponentUnpickler(pickle.Unpickler):
    """The other way: a config path becomes the resumed trainer's own config object there."""

    def __init__(self, file, cfg: BaseModel):
        super().__init__(file)
        self.objects = config_objects(cfg)

    def persistent_load(self, pid):
        return self.objects[pid]

    def find_class(self, module: str, name: str):
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            moved = moved_component_class(module, name)
            if moved is None:
                raise
            return moved


def moved_component_class(module: str, name: str) -> type | None:
    """The class a checkpoint names by where it lived before each component became a folder of its stage.

    Such a checkpoint names e.g. workers.pipeline.control.dars:DifficultyAdaptiveRollouts (now in
    control/dars/component.py) or workers.pipeline.objective.base:SequenceClip; the class is the one of that
    name in the stage's component modules, found through the registry rather than a table of old paths."""
    from workers.pipeline import STAGES

    parts = module.split(".")
    if parts[:2] != ["workers", "pipeline"] or len(parts) < 3 or parts[2] not in STAGES:
        return None
    registry = STAGES[parts[2]]
    code = {registry.declaration(component).target.partition(":")[0] for component in registry.names()}
    found = {getattr(importlib.import_module(m), name, None) for m in sorted(code)} - {None}
    return found.pop() if len(found) == 1 else None


def freeze_components(stages, cfg: BaseModel) -> bytes:
    """The stage components, pickled, with the config objects they keep written as references."""
    buffer = io.BytesIO()
    _ComponentPickler(buffer, cfg).dump(stages)
    return buffer.getvalue()


def thaw_components(frozen: bytes, cfg: BaseModel):
    """The components `freeze_components` saved, holding `cfg`'s own objects."""
    return _ComponentUnpickler(io.BytesIO(frozen), cfg).load()
