"""From YAML, --set overrides and a method preset to a validated RunConfig.

Resolution order, last wins: defaults < method preset < YAML file < --set overrides.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from workers.config.migrate import upgrade
from workers.config.presets import METHODS, method_names
from workers.config.problems import validation_problems
from workers.config.schema import SWITCHED_SECTIONS, RunConfig, kind_of
from workers.errors import ConfigError


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Return base with update laid over it; nested dicts merge, everything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def lay_over(under: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` laid over `under` (a method preset, a YAML file under --set overrides). A switched section (a stage,
    the task, the model, ...) whose kind `over` changes takes none of `under`'s knobs for that section: they belong
    to the kind replaced (`--set model.name=/models/m` over a file that sizes the tiny model is a run of /models/m)."""
    under = copy.deepcopy(under)
    for section, switch in SWITCHED_SECTIONS.items():
        mine, theirs = over.get(section), under.get(section)
        if isinstance(mine, dict) and isinstance(theirs, dict) and switch.knob in mine:
            if kind_of(section, mine) != kind_of(section, theirs):
                del under[section]
    return deep_merge(under, over)


lay_over_preset = lay_over  # the user's config over a method preset


def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply one `key.path=value` override in place; the value is read as YAML (7, true, 1e-3, [a, b])."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects key.path=value, got '{assignment}'", {"config": "expected key.path=value"})
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    parts = key.strip().split(".")
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            problem = f"'{part}' is not a section: it holds a value, not knobs"
            raise ConfigError(f"--set {key}: {problem}", {key.strip(): problem})
        node = child
    node[parts[-1]] = value


MAX_DEPTH = 16  # how deep a raw config may nest (a section, a knob, a value's own lists and mappings)


def shape_problems(raw: Any) -> dict[str, str]:
    """What keeps `raw` from even having a run config's shape, by field ({} when it has it).

    A mapping of sections; `method` text (or none); every section a mapping of knobs; nothing nested deeper
    than MAX_DEPTH. Checked before anything reads the config (merging, the form, the presets), so a list where a
    section belongs is a message naming the section, never a crash in the code that reads it.
    """
    if not isinstance(raw, dict):
        return {"config": f"a run config is a mapping of sections to knobs, got {_kind(raw)}"}
    problems = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            problems["config"] = f"a section's name is text, got {_kind(key)} {key!r:.40}"
        elif key == "method":
            if value is not None and not isinstance(value, str):
                problems[key] = f"a method is the name of a preset, got {_kind(value)}"
        elif key in RunConfig.model_fields and _is_section(key) and not isinstance(value, dict):
            problems[key] = f"a section is a mapping of knobs (e.g. {key}: {{...}}), got {_kind(value)}"
        elif _depth(value) > MAX_DEPTH:
            problems[key] = f"nested more than {MAX_DEPTH} deep"
    return problems


def _is_section(field: str) -> bool:
    annotation = RunConfig.model_fields[field].annotation
    return field not in ("method", "seed") and annotation not in (int, str, float, bool)


def _depth(value: Any, limit: int = MAX_DEPTH + 1) -> int:
    """How deep `value` nests, counted no further than `limit` (a hostile config may nest thousands deep)."""
    if limit <= 0 or not isinstance(value, (dict, list)):
        return 0
    items = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(item, limit - 1) for item in items), default=0)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", bool: "true/false", type(None): "nothing"}.get(
        type(value), f"a {type(value).__name__}"
    )


def resolve(raw: dict[str, Any]) -> RunConfig:
    """Lay the user's dict over its method's preset, upgrade what an older config holds (migrate.py) and
    validate the result."""
    problems = shape_problems(raw)
    if problems:
        raise ConfigError("\n".join(f"{where}: {text}" for where, text in problems.items()), problems)
    method = raw.get("method")
    if method is not None:
        if method not in METHODS:
            problem = f"unknown method '{method}'; valid: {', '.join(method_names())}"
            raise ConfigError(f"method: {problem}", {"method": problem})
        raw = lay_over_preset(METHODS[method][1], raw)
    raw = upgrade(raw)
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as exc:
        problems = validation_problems(exc)
        message = "\n".join(f"{where}: {text}" if where else text for where, text in problems)
        raise ConfigError(message, {where or "config": text for where, text in problems}) from None


def load_config(path: str | Path | None = None, overrides: list[str] = (), base: dict | None = None) -> RunConfig:
    """Read a YAML run config (or start from `base`), apply --set overrides, resolve and validate."""
    raw: dict[str, Any] = copy.deepcopy(base) if base else {}
    if path is not None:
        raw = lay_over(raw, read_yaml(Path(path)))
    changes: dict[str, Any] = {}
    for assignment in overrides:
        apply_override(changes, assignment)
    return resolve(lay_over(raw, changes))


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a run config must be a mapping of sections to knobs")
    return data
