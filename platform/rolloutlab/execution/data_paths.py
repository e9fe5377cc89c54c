"""Dataset and model paths of a run config, confined to the deployment's DATA_ROOTS.

A config names files a worker will read (task.path, task.eval_path, and model.name
when it is not the built-in 'tiny'). Here, at launch and at bundle import, each is
resolved (symlinks followed, `..` collapsed; a relative path is taken under each
root in turn) and must land inside one of settings.DATA_ROOTS and exist; anything
else is a field error naming the knob, so no worker is ever asked to read it. What
the web side can check cheaply is checked too: that eval.size fits in the dataset.

    cfg = confine(cfg)       # the same config with every path resolved, or ConfigError(fields=...)
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from workers.config import RunConfig
from workers.errors import ConfigError

FILE_TASKS = ("jsonl", "parquet")
MAX_PATH = 4096


def roots() -> list[Path]:
    return [Path(root).resolve() for root in settings.DATA_ROOTS]


def resolve_under_roots(value: str) -> Path:
    """The resolved path, if it lies inside a data root; ValueError saying why not."""
    if len(value) > MAX_PATH or "\0" in value:
        raise ValueError("not a usable path")
    allowed = roots()
    if not allowed:
        raise ValueError("this deployment allows no data paths (DATA_ROOTS is empty)")
    given = Path(value)
    candidates = [given] if given.is_absolute() else [root / given for root in allowed]
    for candidate in candidates:
        resolved = candidate.resolve()  # follows every symlink: a link out of the root lands outside it
        if any(resolved.is_relative_to(root) for root in allowed) and resolved.exists():
            return resolved
    inside = [c.resolve() for c in candidates if any(c.resolve().is_relative_to(r) for r in allowed)]
    if not inside:
        raise ValueError(f"'{value}' is outside this deployment's data roots ({', '.join(map(str, allowed))})")
    raise ValueError(f"'{value}': no such file under the data roots")


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
    if cfg.model.name == "tiny":
        return None
    try:
        path = resolve_under_roots(cfg.model.name)
    except ValueError as exc:
        errors["model.name"] = f"neither 'tiny' nor a model directory: {exc}"
        return None
    if not (path / "config.json").is_file():
        errors["model.name"] = f"'{cfg.model.name}' is not a directory holding a saved model (config.json)"
        return None
    return str(path)


def confine(cfg: RunConfig) -> RunConfig:
    """The config with its paths resolved inside DATA_ROOTS; ConfigError naming each bad knob otherwise."""
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
