"""The compare page's data: runs grouped, curves aggregated across seeds, a final-performance table
with honest statistics, and the config knobs that differ between groups.

    payload = build_comparison(parse_view(request.GET), request.user)

Curves: each run's series (downsampled on the server) is put on the chosen x-axis
(step, rollout tokens or training seconds, the engine's counters), smoothed with
a debiased EMA if asked, and interpolated onto a grid spanning the x-range that
every run of its group has reached; the band across the group's runs is the
view's choice of rolloutlab.compare.stats.BANDS (min-max by default).

Runs are grouped by "method" or by a config knob whose value differs among them
(group_options); any other group-by is a BadView, so a 400 naming it.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from django.db.models import Count, Q, QuerySet

from rolloutlab.compare import stats
from rolloutlab.compare.permalink import X_AXES, BadView, View
from rolloutlab.metrics.series import first_reaching, metric_names, read_many, values_at
from rolloutlab.runs.access import get_experiment_for_user, get_runs_for_user, visible_experiments
from rolloutlab.runs.models import Experiment, Project, Run, State
from workers import metrics  # not `as metric`: the functions here name a metric `metric`

DEFAULT_GROUP = "method"
MISSING = "—"  # a knob a run's components do not have
GRID_POINTS = 200
SEED_POINTS = 100  # per individual-seed curve: keeps 50 runs x 10 metrics under 2 MB
SERIES_POINTS = 300
INDEX_PAGE_SIZE = 50
ACTIVE = (State.QUEUED, State.RUNNING)


def select_runs(view: View, user) -> list[Run]:
    """The view's runs, each one the user may see (Http404 naming the first that is not); BadView when the
    view groups them by a knob that does not differ among them."""
    if view.runs:
        found = sorted(get_runs_for_user(user, view.runs), key=lambda run: run.id)
    else:
        found = list(get_experiment_for_user(user, view.experiment).runs.order_by("id"))
    if not found:
        raise BadView("experiment: it has no runs yet")
    check_group(view.group, found)
    return found


def experiments_for_index(user, project: Project | None = None) -> QuerySet[Experiment]:
    """The experiments the user may see (of one project, given one they may see), newest first, with run counts."""
    experiments = visible_experiments(user)
    if project is not None:
        experiments = experiments.filter(project=project)
    return (
        experiments.select_related("project", "owner")
        .annotate(run_count=Count("runs"), running=Count("runs", filter=Q(runs__state__in=ACTIVE)))
        .order_by("-created_at", "-id")
    )


def varying_knobs(runs: list[Run]) -> list[str]:
    """The config knobs (dotted paths) whose value is not the same in every run; a knob some runs lack varies."""
    configs = [flatten(run.config) for run in runs]
    knobs = sorted({knob for config in configs for knob in config})
    return [knob for knob in knobs if len({config.get(knob, MISSING) for config in configs}) > 1]


ENVIRONMENT_GROUP = "environment"  # the environment a run's episodes ran in, "none" for single-turn runs


def group_options(knobs: list[str]) -> list[str]:
    """What runs may be grouped by, given their varying_knobs: the method (the default, even when all share it),
    the environment where runs ran in different ones, then each varying knob."""
    environments = [ENVIRONMENT_GROUP] if "environment.name" in knobs else []
    return [DEFAULT_GROUP, *environments, *(knob for knob in knobs if knob != DEFAULT_GROUP)]


def check_group(group: str, runs: list[Run]) -> None:
    options = group_options(varying_knobs(runs))
    if group not in options:
        shown = ", ".join(options[:20]) + (", ..." if len(options) > 20 else "")
        raise BadView(f"group: {group!r} does not differ among these runs; group by one of {shown}")


def group_label(run: Run, group: str) -> str:
    if group == ENVIRONMENT_GROUP:
        return run.environment
    if group in ("method", "task", "seed", "name"):
        value = getattr(run, group)
        return "custom" if value in (None, "") else str(value)  # seed 0 is a seed, not "custom"
    node = run.config
    for part in group.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return f"{group}={node}"


def group_runs(runs: list[Run], group: str) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[group_label(run, group)].append(run)
    return dict(sorted(groups.items()))


def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: s_t = w s_(t-1) + (1 - w) x_t, divided by (1 - w^t) to remove the start bias."""
    if weight <= 0 or len(values) == 0:
        return values
    out, last = np.empty_like(values), 0.0
    for i, value in enumerate(values):
        last = weight * last + (1 - weight) * value
        out[i] = last / (1 - weight ** (i + 1))
    return out


def run_curve(series, run_id: int, metric: str, x_axis: str, weight: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, y) of one run's metric on the chosen axis, or None when it has no points yet."""
    if (run_id, metric) not in series:
        return None
    steps, values = (np.asarray(a, dtype=float) for a in series[(run_id, metric)])
    counter = X_AXES[x_axis]
    if counter is None:
        x = steps
    else:
        if (run_id, counter) not in series:
            return None
        c_steps, c_values = (np.asarray(a, dtype=float) for a in series[(run_id, counter)])
        x = np.interp(steps, np.r_[0.0, c_steps], np.r_[0.0, c_values])  # the counters are 0 before step 1
    return x, ema(values, weight)


def aggregate(curves: list[tuple[np.ndarray, np.ndarray]], band: str = stats.DEFAULT_BAND) -> dict:
    """Mean and band (one of stats.BANDS) of a group's curves on a grid over the x-range every one covers."""
    lo = max(x[0] for x, _ in curves)
    hi = min(x[-1] for x, _ in curves)
    if len(curves) == 1 or hi <= lo:
        x, y = curves[0] if len(curves) == 1 else max(curves, key=lambda c: c[0][-1])
        return {"x": x, "mean": y, "low": None, "high": None, "covered": len(curves) == 1}
    grid = np.linspace(lo, hi, GRID_POINTS)
    stacked = np.stack([np.interp(grid, x, y) for x, y in curves])  # (runs, grid)
    centre, low, high = stats.band(stacked, band)
    return {"x": grid, "mean": centre, "low": low, "high": high, "covered": True}


def rounded(values) -> list | None:
    """To 6 significant digits (a smaller payload), NaN to null; vectorised, for hundreds of curves."""
    if values is None:
        return None
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values) & (values != 0)
    scale = np.ones_like(values)
    scale[finite] = 10.0 ** (5 - np.floor(np.log10(np.abs(values[finite]))))
    out = (np.round(values * scale) / scale).tolist()
    return [None if v != v or v in (float("inf"), float("-inf")) else v for v in out]


def thin(x: np.ndarray, y: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= points:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, points).round().astype(int))
    return x[keep], y[keep]


def charts(view: View, groups: dict[str, list[Run]], series) -> dict:
    out = {}
    for metric in view.metrics:
        per_group = {}
        for label, runs in groups.items():
            curves = {run.id: run_curve(series, run.id, metric, view.x, view.smooth) for run in runs}
            present = [c for c in curves.values() if c is not None and len(c[0])]
            if not present:
                continue
            agg = aggregate(present, view.band)
            entry = {"x": rounded(agg["x"]), "mean": rounded(agg["mean"]), "low": rounded(agg["low"]),
                     "high": rounded(agg["high"]), "runs": len(present)}  # fmt: skip
            if view.seeds:
                entry["seeds"] = [
                    {"run": run_id, "x": rounded(thin(*c, SEED_POINTS)[0]), "y": rounded(thin(*c, SEED_POINTS)[1])}
                    for run_id, c in curves.items()
                    if c is not None and len(c[0])
                ]
            per_group[label] = entry
        out[metric] = per_group
    return out


def final_table(view: View, groups: dict[str, list[Run]]) -> list[dict]:
    """Per group: mean, IQM with its bootstrap interval, P(improvement over the baseline), time to target."""
    metric = view.table_metric
    scores = {
        label: [score(r.summary[metric]) for r in runs if r.summary.get(metric) is not None]
        for label, runs in groups.items()
    }
    baseline = scores.get(view.baseline) if view.baseline in scores else None
    reach = time_to_target(view, groups) if view.target is not None else {}
    table = []
    for label, runs in groups.items():
        values = np.array(scores[label], dtype=float)
        row = {"group": label, "runs": len(runs), "scored": len(values),
               "running": sum(r.state in (State.RUNNING, State.QUEUED) for r in runs)}  # fmt: skip
        if len(values):
            row["mean"] = stats.mean(values)
            row["iqm"] = stats.iqm(values)
            row["iqm_low"], row["iqm_high"] = stats.interval(values, stats.iqm)
            row["interval_note"] = interval_note(len(values))
        if baseline and len(values) and label != view.baseline:
            row["p_improvement"] = stats.probability_of_improvement(values, baseline)
            row["p_low"], row["p_high"] = stats.improvement_interval(values, baseline)
        if label in reach:
            row["reach"] = reach[label]
        table.append({k: _json_number(v) for k, v in row.items()})
    return table


# Below this many runs a group's stratified-bootstrap IQM interval is the runs' own lowest and highest value (with
# 3 the IQM is the mean and a resample of all-lowest is likelier than 2.5%; with 4 the middle two's mean can be
# either extreme as often): it says every run beat every run, nothing about the next one.
RANGE_BELOW_RUNS = 5


def interval_note(runs: int) -> str:
    """What the group's IQM interval rests on, said beside it: its run count, and when that makes it a range."""
    rests_on = f"{runs} run{'s' if runs != 1 else ''}"
    if runs < RANGE_BELOW_RUNS:
        return f"{rests_on}: below {RANGE_BELOW_RUNS} the interval is the runs' own range, not a confidence interval"
    return rests_on


def _json_number(value):
    """Floats to 6 significant digits; NaN and infinities (no interval from one run) to null."""
    if isinstance(value, float):
        return float(f"{value:.6g}") if np.isfinite(value) else None
    return value


def time_to_target(view: View, groups: dict[str, list[Run]]) -> dict[str, dict]:
    """Steps, rollout tokens and training seconds each group's runs needed to first reach the target."""
    metric = view.table_metric
    run_ids = [r.id for runs in groups.values() for r in runs]
    first = first_reaching(run_ids, metric, view.target)
    pairs = [(run_id, step) for run_id, step in first.items()]
    tokens = values_at(pairs, metrics.ROLLOUT_TOKENS)
    seconds = values_at(pairs, metrics.WALL_S)
    out = {}
    for label, runs in groups.items():
        reached = [r.id for r in runs if r.id in first]
        if not reached:
            out[label] = {"reached": 0, "of": len(runs)}
            continue
        out[label] = {
            "reached": len(reached),
            "of": len(runs),
            "steps": float(np.mean([first[i] for i in reached])),
            **tokens_spent([tokens.get(i, 0.0) for i in reached]),  # step 0: nothing spent yet
            "seconds": float(np.mean([seconds.get(i, 0.0) for i in reached])),
        }
    return out


def leaves(config: dict, prefix: str = "") -> dict[str, object]:
    """{dotted knob: its value} for every knob of a config; reward weights stay one knob (a dict)."""
    flat = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path != "reward.weights":
            flat.update(leaves(value, path + "."))
        else:
            flat[path] = value
    return flat


def tokens_spent(per_run: list[float]) -> dict[str, float]:
    """The rollout tokens the runs that reached a target had spent by then: their mean and range."""
    return {"tokens": float(np.mean(per_run)), "tokens_low": float(min(per_run)), "tokens_high": float(max(per_run))}


def parallel_coordinates(view: View, runs: list[Run], knobs: list[str]) -> dict | None:
    """One line per run over the knobs that vary among the runs (their varying_knobs, seeds aside) and the
    final table metric:
    a sweep's shape at a glance. None when no knob but the seed varies, or no run has the metric yet.

    A knob whose values are all numbers is a numeric axis; any other is categorical, its values placed
    at 0, 1, ... in sorted order and named by ticktext, as Plotly's parcoords wants."""
    scored = [run for run in runs if _finite(run.summary.get(view.table_metric))]
    knobs = [knob for knob in knobs if knob != "seed"]
    if not knobs or not scored:
        return None
    configs = [leaves(run.config) for run in scored]
    values = {knob: [config.get(knob, MISSING) for config in configs] for knob in knobs}
    shown = axes_to_show(values)
    dimensions = [knob_axis(knob, values[knob]) for knob in knobs if knob in shown]
    dimensions.append({"label": view.table_metric, "values": [score(run.summary[view.table_metric]) for run in scored]})
    return {"dimensions": dimensions, "runs": [run.id for run in scored], "unscored": len(runs) - len(scored),
            "hidden_knobs": [knob for knob in knobs if knob not in shown]}  # fmt: skip


# beyond this many knob axes a parallel-coordinates chart is unreadable (a comparison of methods may differ in 30)
MAX_KNOB_AXES = 12


def axes_to_show(values: dict[str, list]) -> set[str]:
    """The knobs drawn as axes: all, up to MAX_KNOB_AXES; past that those with the most distinct values among
    the runs (the swept ones, over those a preset switches between two values), ties by name."""
    distinct = {knob: len({repr(v) for v in vs}) for knob, vs in values.items()}
    return set(sorted(values, key=lambda knob: (-distinct[knob], knob))[:MAX_KNOB_AXES])


def score(value) -> float:
    """A run's summary value as a float: NaN if it is no number; ±inf past a float's range. A float near its
    limit (1.7e308) comes back from PostgreSQL's jsonb as an integer of 309 digits, which numpy cannot take."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _finite(value) -> bool:
    return math.isfinite(score(value))


def knob_axis(knob: str, values: list) -> dict:
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return {"label": knob, "values": [float(v) for v in values]}
    text = [v if isinstance(v, str) else repr(v) for v in values]
    categories = sorted(set(text))
    return {"label": knob, "values": [categories.index(t) for t in text],
            "tickvals": list(range(len(categories))), "ticktext": categories}  # fmt: skip


def flatten(config: dict) -> dict[str, str]:
    """leaves() as text, so values of any type compare and sort."""
    return {path: value if isinstance(value, str) else repr(value) for path, value in leaves(config).items()}


def config_diff(groups: dict[str, list[Run]]) -> list[dict]:
    """The knobs whose values are not the same in every run: per group, its value(s)."""
    flat = {label: [flatten(r.config) for r in runs] for label, runs in groups.items()}
    knobs = sorted({k for configs in flat.values() for c in configs for k in c})
    rows = []
    for knob in knobs:
        values = {label: sorted({c.get(knob, MISSING) for c in configs}) for label, configs in flat.items()}
        if len({v for vs in values.values() for v in vs}) > 1:
            within = any(len(vs) > 1 for vs in values.values())
            rows.append({"knob": knob, "within_group": within,
                         "values": {label: " | ".join(vs) for label, vs in values.items()}})  # fmt: skip
    rows.sort(key=lambda r: (r["within_group"], r["knob"]))  # the knobs that tell groups apart first
    return rows


PICKER_RUNS = 50  # the runs whose metrics the picker offers: a sweep's runs log the same ones


def offered_metrics(view: View, runs: list[Run]) -> list[str]:
    """The metric picker's choices: what the runs have logged, and the view's own metrics, logged yet or not (a page
    opened while its runs are queued must keep the metrics it asked for, not narrow its permalink to the step-0
    evaluation). The page adds those that arrive later as it refreshes."""
    return sorted(metric_names([run.id for run in runs[:PICKER_RUNS]]) | set(view.metrics))


def build_comparison(view: View, user) -> dict:
    runs = select_runs(view, user)
    groups = group_runs(runs, view.group)
    counters = [c for c in X_AXES.values() if c]
    series = read_many([r.id for r in runs], sorted(set(view.metrics) | set(counters)), SERIES_POINTS)
    knobs = varying_knobs(runs)
    if view.baseline and view.baseline not in groups:
        view.baseline = ""
    return {
        "permalink": view.query(),
        "view": {
            "group": view.group,
            "metrics": view.metrics,
            "x": view.x,
            "smooth": view.smooth,
            "band": view.band,
            "seeds": view.seeds,
            "baseline": view.baseline,
            "target": view.target,
            "table_metric": view.table_metric,
        },  # fmt: skip
        "groups": [
            {
                "label": label,
                "runs": [
                    {
                        "id": r.id,
                        "name": r.name,
                        "seed": r.seed,
                        "state": r.state,
                        "step": r.step,
                        "total_steps": r.total_steps,
                    }
                    for r in members
                ],
            }  # fmt: skip
            for label, members in groups.items()
        ],
        "group_options": group_options(knobs),
        "metrics": offered_metrics(view, runs),
        "charts": charts(view, groups, series),
        "parallel": parallel_coordinates(view, runs, knobs),
        "table": final_table(view, groups),
        "diff": config_diff(groups),
        "live": any(r.state in (State.QUEUED, State.RUNNING) for r in runs),
    }
