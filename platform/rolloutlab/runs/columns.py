"""The runs table's columns: any config knob, any final metric, the run's duration and its rollout tokens.

A column is named by a key the saved views store:

    config:rollout.group_size   a knob of the resolved config (its dotted path)
    metric:eval/pass@1          a metric's latest value (run.summary)
    duration                    wall time from start to finish (or to now, while it runs)
    rollout_tokens              completion tokens decoded so far (a counter the trainer reports)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated

from django.utils import timezone
from pydantic import AfterValidator, Field, ValidationError

from rolloutlab.inputs import Strict, text
from rolloutlab.runs.models import Run
from rolloutlab_client.wire import MetricName
from workers import metrics as metric

DURATION, ROLLOUT_TOKENS = "duration", "rollout_tokens"
FIXED = {DURATION: "duration", ROLLOUT_TOKENS: "rollout tokens"}
CONFIG, METRIC = "config:", "metric:"
DEFAULT_COLUMNS = [f"{METRIC}{metric.PASS_AT_1}", f"{METRIC}{metric.REWARD_MEAN}", DURATION]
MAX_COLUMNS = 40
MAX_KNOB_DEPTH = 6  # config paths are <stage>.<knob>; deeper is a JSON knob's inside, shown whole
KNOB_PATH = re.compile(r"[A-Za-z0-9_]{1,50}(\.[A-Za-z0-9_]{1,50}){0,5}")


class _Metric(Strict):
    name: MetricName


def valid_column(key: str) -> str:
    """A column key as the saved views store it; anything else names what is wrong with it."""
    if key in FIXED:
        return key
    if key.startswith(CONFIG):
        if not KNOB_PATH.fullmatch(key.removeprefix(CONFIG)):
            raise ValueError("a config column names a knob by its dotted path, e.g. 'config:rollout.group_size'")
    elif key.startswith(METRIC):
        try:
            _Metric.model_validate({"name": key.removeprefix(METRIC)})
        except ValidationError as exc:
            raise ValueError(f"a metric column's name: {exc.errors()[0]['msg']}") from None
    else:
        raise ValueError(f"a column is 'config:<knob>', 'metric:<name>', or one of {', '.join(FIXED)}")
    return key


ColumnKey = Annotated[str, Field(min_length=1, max_length=220), AfterValidator(valid_column)]


class ViewIn(Strict):
    """A saved view of the runs table: its name, the project it belongs to (none: all projects), its columns."""

    name: text(50, min_length=1) = Field(description="the view's name")
    project: text(100) | None = Field(None, description="the project's name; none for the list of all projects")
    columns: list[ColumnKey] = Field(max_length=MAX_COLUMNS)


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    metric: str = ""  # a metric column's name: runs_list.js refreshes those cells live


def column(key: str) -> Column:
    if key.startswith(METRIC):
        name = key.removeprefix(METRIC)
        return Column(key, name, metric=name)
    if key.startswith(CONFIG):
        return Column(key, key.removeprefix(CONFIG))
    if key == ROLLOUT_TOKENS:
        return Column(key, FIXED[key], metric=metric.ROLLOUT_TOKENS)
    return Column(key, FIXED[key])


def config_knobs(config: dict, prefix: str = "", depth: int = 0) -> list[str]:
    """The dotted paths of a config's leaves (a list, or a dict deeper than MAX_KNOB_DEPTH, is one leaf)."""
    paths = []
    for name, value in config.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and value and depth < MAX_KNOB_DEPTH - 1:
            paths.extend(config_knobs(value, f"{path}.", depth + 1))
        else:
            paths.append(path)
    return paths


def available_columns(runs: list[Run]) -> dict[str, list[str]]:
    """What the column chooser offers for these runs: every knob any of them has, every metric any reported."""
    knobs = sorted({path for run in runs if isinstance(run.config, dict) for path in config_knobs(run.config)})
    metrics = sorted({name for run in runs for name in run.summary})
    return {
        "fixed": list(FIXED),
        "config": [f"{CONFIG}{path}" for path in knobs],
        "metric": [f"{METRIC}{name}" for name in metrics],
    }


def knob_value(config, path: str):
    for part in path.split("."):
        if not isinstance(config, dict) or part not in config:
            return None
        config = config[part]
    return config


def duration_seconds(run: Run) -> float | None:
    """Wall time from start to finish, or to now while it runs; an imported run has only its training time."""
    if run.started_at is not None:
        end = run.finished_at or timezone.now()
        return max(0.0, (end - run.started_at).total_seconds())
    return run.train_seconds or None


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def shown(value) -> str:
    """A cell's text: a float to 3 decimals, and a small one (a learning rate, 0.0002) to 3 significant digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:.3f}" if abs(value) < 1e4 else f"{value:.4g}"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def cell(run: Run, key: str) -> str:
    """What the runs table shows for one run in one column."""
    if key == DURATION:
        return human_duration(duration_seconds(run))
    if key == ROLLOUT_TOKENS:
        tokens = run.summary.get(metric.ROLLOUT_TOKENS)
        return "" if tokens is None else f"{int(tokens):,}"
    if key.startswith(METRIC):
        return shown(run.summary.get(key.removeprefix(METRIC)))
    return shown(knob_value(run.config, key.removeprefix(CONFIG)))


def table_rows(runs: list[Run], keys: list[str]) -> list[tuple[Run, list[tuple[Column, str]]]]:
    columns = [column(key) for key in keys]
    return [(run, [(col, cell(run, col.key)) for col in columns]) for run in runs]
