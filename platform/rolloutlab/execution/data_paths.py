"""Dataset and model paths of a run config, confined to the deployment's DATA_ROOTS and MODEL_ROOTS.

A config names files a worker will read (task.path, task.eval_path, and model.name
when it is a directory, neither the built-in 'tiny' nor a packaged model). Here, at
launch and at bundle import, each is resolved (symlinks followed, `..` collapsed; a
relative path is taken under each root in turn) and must land inside one of
settings.DATA_ROOTS (datasets) or settings.MODEL_ROOTS (models) and exist; anything
else is a field error naming the knob and the setting, so no worker is ever asked to
read it. What the web side can check cheaply is checked too: that eval.size fits in
the dataset, and that a model directory holds what a run needs (workers.models.directory).

    cfg = confine(cfg)       # the same config with every path resolved, or ConfigError(fields=...)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from workers.config import RunConfig
from workers.errors import ConfigError
from workers.models.directory import has_chat_template, model_directory_problems, saved_models
from workers.models.packaged import PACKAGED_MODELS, gguf_file

FILE_TASKS = ("jsonl", "parquet")
MAX_PATH = 4096


@dataclass(frozen=True)
class Roots:
    setting: str  # the deployment setting: DATA_ROOTS or MODEL_ROOTS
    what: str  # "data", "model"

    def folders(self) -> list[Path]:
        return [Path(root).resolve() for root in getattr(settings, self.setting)]

    def outside(self, value: str, allowed: list[Path]) -> str:
        return (f"'{value}' is outside this deployment's {self.what} roots ({self.setting}: "
                f"{os.pathsep.join(map(str, allowed))}); to allow it, its administrator adds its folder to "
                f"{self.setting} ('{os.pathsep}'-separated folders) in the deployment's environment")  # fmt: skip


DATA = Roots("DATA_ROOTS", "data")
MODELS = Roots("MODEL_ROOTS", "model")


def resolve_under_roots(value: str, where: Roots = DATA) -> Path:
    """The resolved path, if it lies inside one of `where`'s roots; ValueError saying why not."""
    if len(value) > MAX_PATH or "\0" in value:
        raise ValueError("not a usable path")
    allowed = where.folders()
    if not allowed:
        raise ValueError(f"this deployment allows no {where.what} paths ({where.setting} is empty)")
    given = Path(value)
    candidates = [given] if given.is_absolute() else [root / given for root in allowed]
    for candidate in candidates:
        resolved = candidate.resolve()  # follows every symlink: a link out of the root lands outside it
        if any(resolved.is_relative_to(root) for root in allowed) and resolved.exists():
            return resolved
    inside = [c.resolve() for c in candidates if any(c.resolve().is_relative_to(r) for r in allowed)]
    if not inside:
        raise ValueError(where.outside(value, allowed))
    raise ValueError(f"'{value}': no such file under the {where.what} roots")


def saved_model_paths() -> list[str]:
    """The saved models (directories holding config.json) under MODEL_ROOTS: the launch form's model picker."""
    return [str(path) for root in MODELS.folders() for path in saved_models(root)]


def count_rows(path: Path, kind: str) -> int:
    """Records in a dataset file: non-blank lines of a JSONL file, rows of a parquet file (from its footer)."""
    if kind == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    with path.open("rb") as lines:
        return sum(1 for line in lines if line.strip())


def check_task(cfg: RunConfig, errors: dict[str, str]) -> dict[str, str]:
    """{knob: resolved path} for the task's files; problems go to errors."""
    resolved = {}
    if cfg.task.name not in FILE_TASKS:
        return resolved  # a generated task reads no file
    for knob in ("path", "eval_path"):
        value = getattr(cfg.task, knob)
        if not value:
            continue
        try:
            path = resolve_under_roots(value)
        except ValueError as exc:
            errors[f"task.{knob}"] = str(exc)
            continue
        if not path.is_file():
            errors[f"task.{knob}"] = f"'{value}' is not a file"
            continue
        resolved[knob] = str(path)
    if "path" in resolved and "task.eval_path" not in errors:
        check_eval_size(cfg, resolved, errors)
    return resolved


def check_eval_size(cfg: RunConfig, resolved: dict[str, str], errors: dict[str, str]) -> None:
    try:
        if "eval_path" in resolved:
            rows = count_rows(Path(resolved["eval_path"]), cfg.task.name)
            if cfg.eval.size > rows:
                errors["eval.size"] = f"{cfg.eval.size} held-out prompts, but task.eval_path holds {rows} records"
        else:
            rows = count_rows(Path(resolved["path"]), cfg.task.name)
            if cfg.eval.size >= rows:
                errors["eval.size"] = (f"{cfg.eval.size} held-out prompts would leave none of task.path's {rows} "
                                       "records to train on; lower eval.size or give task.eval_path")  # fmt: skip
    except OSError as exc:
        errors["task.path"] = f"cannot be read ({exc.strerror or exc})"
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors on a file that is not parquet
        errors["task.path"] = f"not a readable {cfg.task.name} file ({exc})"


def check_model(cfg: RunConfig, errors: dict[str, str]) -> str | None:
    """The resolved directory of a model given by path; problems go to errors."""
    name = cfg.model.name
    if name == "tiny":
        return None
    if name in PACKAGED_MODELS:
        try:
            gguf_file(name)
        except ConfigError as exc:
            errors.update(exc.fields)
        return None
    try:
        path = resolve_under_roots(name, MODELS)
    except ValueError as exc:
        errors["model.name"] = f"neither 'tiny', a packaged model nor a model directory: {exc}"
        return None
    problems = model_directory_problems(path, chat=False)
    if problems:
        errors["model.name"] = f"'{name}' cannot be used: {'; '.join(problems)}"
        return None
    if cfg.prompt.format == "chat" and not has_chat_template(path):
        errors["prompt.format"] = f"the tokenizer in '{name}' has no chat template; use 'plain'"
        return None
    return str(path)


def confine(cfg: RunConfig) -> RunConfig:
    """The config with its paths resolved inside DATA_ROOTS and MODEL_ROOTS; ConfigError naming each bad knob
    otherwise."""
    errors: dict[str, str] = {}
    task_paths = check_task(cfg, errors)
    model_path = check_model(cfg, errors)
    if errors:
        raise ConfigError("the config reads files this deployment does not allow", fields=errors)
    if not task_paths and model_path is None:
        return cfg
    data = cfg.model_dump(mode="json")
    data["task"].update(task_paths)
    if model_path is not None:
        data["model"]["name"] = model_path
    return RunConfig.model_validate(data)
