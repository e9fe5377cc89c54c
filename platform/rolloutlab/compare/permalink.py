"""What a compare page shows, as parsed from (and written back to) its URL: the permalink.

    /compare/?runs=3,4,7&group=method&metrics=eval/pass@1,reward/mean&x=tokens&smooth=0.6
             &band=minmax&seeds=1&baseline=grpo&target=0.5

Which config knobs may group the runs depends on the runs (rolloutlab.compare.service.check_group);
here a group-by is only checked for its shape.

Every setting has a default, so a URL with only `runs` (or `experiment`) is complete.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from urllib.parse import urlencode

from rolloutlab.compare.stats import BANDS, DEFAULT_BAND
from rolloutlab.runs.table import MAX_COMPARED as MAX_RUNS
from workers import metrics as metric

X_AXES = {"step": None, "tokens": metric.ROLLOUT_TOKENS, "seconds": metric.WALL_S}
DEFAULT_METRICS = [metric.PASS_AT_1, metric.REWARD_MEAN]
MAX_METRICS = 12
_METRIC = re.compile(r"[A-Za-z][\w@./-]{0,199}")
_GROUP = re.compile(r"[A-Za-z_][A-Za-z0-9_.@-]{0,129}")  # a dotted config knob path, as flatten() writes it
TARGET_BOUND = 1e12  # a target beyond this is a typo: no metric of a run reaches it


class BadView(ValueError):
    """A compare URL naming something that cannot be shown; the message says which parameter."""


@dataclass
class View:
    runs: list[int] = field(default_factory=list)
    experiment: int | None = None
    group: str = "method"
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    x: str = "step"
    smooth: float = 0.0
    band: str = DEFAULT_BAND
    seeds: bool = False
    baseline: str = ""
    target: float | None = None
    table_metric: str = ""

    def __post_init__(self):
        self.table_metric = self.table_metric or self.metrics[0]

    def query(self) -> str:
        """The canonical query string of this view: the permalink."""
        params = {"runs": ",".join(map(str, self.runs))} if self.runs else {}
        if self.experiment is not None:
            params["experiment"] = self.experiment
        params.update(group=self.group, metrics=",".join(self.metrics), x=self.x, smooth=f"{self.smooth:g}")
        params["band"] = self.band
        if self.seeds:
            params["seeds"] = 1
        if self.baseline:
            params["baseline"] = self.baseline
        if self.target is not None:
            params["target"] = f"{self.target:g}"
        if self.table_metric != self.metrics[0]:
            params["table"] = self.table_metric
        return urlencode(params, safe=",/@")


def parse_view(params) -> View:
    """A View from query parameters; BadView names the parameter at fault."""
    view = View(
        runs=_ids(params.get("runs", ""), "runs"),
        experiment=_ids(params.get("experiment", ""), "experiment")[0] if params.get("experiment") else None,
        group=params.get("group") or "method",
        metrics=[m for m in (params.get("metrics") or ",".join(DEFAULT_METRICS)).split(",") if m],
        x=params.get("x") or "step",
        smooth=_number(params.get("smooth") or "0", "smooth"),
        band=params.get("band") or DEFAULT_BAND,
        seeds=params.get("seeds") in ("1", "true", "on"),
        baseline=params.get("baseline", ""),
        target=_number(params["target"], "target") if params.get("target") else None,
        table_metric=params.get("table", ""),
    )
    if not view.runs and view.experiment is None:
        raise BadView("runs: give run ids (runs=1,2,3) or an experiment (experiment=4)")
    if len(view.runs) > MAX_RUNS:
        raise BadView(f"runs: at most {MAX_RUNS} runs")
    if not _GROUP.fullmatch(view.group):
        raise BadView("group: 'method' or a config knob such as 'objective.clip_high'")
    if not view.metrics or len(view.metrics) > MAX_METRICS or not all(_METRIC.fullmatch(m) for m in view.metrics):
        raise BadView(f"metrics: one to {MAX_METRICS} metric names, comma-separated")
    if not _METRIC.fullmatch(view.table_metric):
        raise BadView("table: a metric name")
    if len(view.baseline) > 200 or not view.baseline.isprintable():
        raise BadView("baseline: the label of one group, at most 200 printable characters")
    if view.x not in X_AXES:
        raise BadView(f"x: one of {', '.join(X_AXES)}")
    if view.band not in BANDS:
        raise BadView(f"band: one of {', '.join(BANDS)}")
    if view.target is not None and abs(view.target) > TARGET_BOUND:
        raise BadView(f"target: a number from {-TARGET_BOUND:g} to {TARGET_BOUND:g}")
    if not 0 <= view.smooth < 1:
        raise BadView("smooth: a weight from 0 (none) up to, not including, 1")
    return view


def _ids(text: str, name: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not all(p.isascii() and p.isdigit() and 0 < len(p) <= 18 for p in parts):
        raise BadView(f"{name}: comma-separated ids, each a whole number written with 0-9")
    return [int(p) for p in parts]


def _number(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadView(f"{name}: a number, not {text[:40]!r}") from None
    if not math.isfinite(value):
        raise BadView(f"{name}: a finite number, not {text[:40]!r}")
    return value
