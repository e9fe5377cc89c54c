"""Aggregate statistics a reviewer of an RL paper would accept, as defined by Agarwal et al. 2021,
"Deep Reinforcement Learning at the Edge of the Statistical Precipice" (the rliable library).

Scores are matrices of shape (runs, tasks): score[n, m] is run n's final score on task m.

    iqm(scores)                                   # interquartile mean over all runs and tasks
    interval(scores, iqm)                         # stratified-bootstrap 95% percentile interval
    probability_of_improvement(x, y)              # P(X > Y), averaged over tasks
    improvement_interval(x, y)                    # its bootstrap interval
    band(curves, "minmax")                        # a chart's band across seeds: see BANDS

Stratified bootstrap: every resample draws, for each task separately, as many
runs as that task has, with replacement; a statistic's interval is the
percentile interval of its value over the resamples.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from scipy import stats as scipy_stats

REPS = 2000
CONFIDENCE = 0.95


def as_matrix(scores) -> np.ndarray:
    """(runs,) or (runs, tasks) -> (runs, tasks) float array."""
    array = np.asarray(scores, dtype=float)
    return array[:, None] if array.ndim == 1 else array


def iqm(scores) -> float:
    """Mean of the middle 50% of all scores: 25% trimmed from each end (scipy's trim_mean)."""
    return float(scipy_stats.trim_mean(as_matrix(scores), proportiontocut=0.25, axis=None))


def mean(scores) -> float:
    return float(np.mean(as_matrix(scores)))


def stratified_resamples(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, runs, tasks): each task's column resampled with replacement, independently."""
    runs, tasks = scores.shape
    picks = rng.integers(0, runs, size=(reps, runs, tasks))  # row index per (resample, slot, task)
    return np.take_along_axis(np.broadcast_to(scores, (reps, runs, tasks)), picks, axis=1)


def interval(scores, statistic: Callable = iqm, reps: int = REPS, seed: int = 0) -> tuple[float, float]:
    """The stratified-bootstrap percentile interval of statistic(scores), at CONFIDENCE."""
    matrix = as_matrix(scores)
    if matrix.shape[0] < 2:
        return (float("nan"), float("nan"))
    resamples = stratified_resamples(matrix, reps, np.random.default_rng(seed))
    batched = VECTORISED.get(statistic)  # one call over all resamples, where the statistic allows it
    values = batched(resamples) if batched else np.array([statistic(r) for r in resamples])
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _iqm_many(resamples: np.ndarray) -> np.ndarray:
    return scipy_stats.trim_mean(resamples.reshape(len(resamples), -1), proportiontocut=0.25, axis=1)


def _mean_many(resamples: np.ndarray) -> np.ndarray:
    return resamples.reshape(len(resamples), -1).mean(axis=1)


VECTORISED = {iqm: _iqm_many, mean: _mean_many}


def probability_of_improvement(x, y) -> float:
    """P(X > Y): for each task, the share of pairs (x run, y run) where x scores higher, ties counting
    half (the Mann-Whitney U statistic over m*n); then the mean over tasks."""
    x, y = as_matrix(x), as_matrix(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError("both score matrices need the same tasks (columns)")
    wins = (x[:, None, :] > y[None, :, :]).mean(axis=(0, 1))  # (tasks,)
    ties = (x[:, None, :] == y[None, :, :]).mean(axis=(0, 1))
    return float(np.mean(wins + 0.5 * ties))


def improvement_interval(x, y, reps: int = REPS, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of P(X > Y), resampling X's and Y's runs independently within each task."""
    x, y = as_matrix(x), as_matrix(y)
    if x.shape[0] < 2 or y.shape[0] < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    xs, ys = stratified_resamples(x, reps, rng), stratified_resamples(y, reps, rng)
    wins = (xs[:, :, None, :] > ys[:, None, :, :]).mean(axis=(1, 2))  # (reps, tasks)
    ties = (xs[:, :, None, :] == ys[:, None, :, :]).mean(axis=(1, 2))
    values = (wins + 0.5 * ties).mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def mean_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean across seeds and its 95% t-interval, pointwise. curves: (seeds, points), NaN where a seed has no value."""
    centre, spread, count = _mean_and_standard_error(curves)
    with np.errstate(invalid="ignore"):
        half = scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, np.maximum(count - 1, 1)) * spread
    half = np.where(count > 1, half, np.nan)
    return centre, centre - half, centre + half


def standard_error_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean ± one standard error of the mean, pointwise (about a 68% interval only when seeds are many)."""
    centre, spread, count = _mean_and_standard_error(curves)
    spread = np.where(count > 1, spread, np.nan)
    return centre, centre - spread, centre + spread


def range_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, and the lowest and highest seed, pointwise: the runs themselves, no model of their spread."""
    count = np.sum(~np.isnan(curves), axis=0)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column is NaN, as wanted
        centre, low, high = np.nanmean(curves, axis=0), np.nanmin(curves, axis=0), np.nanmax(curves, axis=0)
    return centre, np.where(count > 1, low, np.nan), np.where(count > 1, high, np.nan)


def no_band(curves: np.ndarray) -> tuple[np.ndarray, None, None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(curves, axis=0), None, None


def _mean_and_standard_error(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    count = np.sum(~np.isnan(curves), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # ddof=1 of one seed: NaN, masked by the callers
        centre = np.nanmean(curves, axis=0)
        spread = np.nanstd(curves, axis=0, ddof=1) / np.sqrt(count)
    return centre, spread, count


# The compare page's band choices: name -> (what the page calls it, the function). Min-max is the
# default, for the 2-5 seeds RL runs usually have: a 95% t-interval's multiplier there is large
# (12.7 standard errors at 2 seeds, 2.8 at 5), so its band swamps the chart; one standard error
# looks like a confidence interval but covers the true mean only half the time at 2 seeds
# (P(|t_1| < 1) = 0.5). The seeds' range claims no confidence level at all: it shows where the runs
# actually went, which is what few seeds can honestly say. (At two seeds the range and one standard
# error are the same band; what differs is what the page says it is.)
BANDS = {
    "minmax": ("min–max of the runs", range_band),
    "ci": ("95% CI of the mean (Student's t)", mean_band),
    "se": ("mean ± 1 standard error", standard_error_band),
    "none": ("no band", no_band),
}
DEFAULT_BAND = "minmax"


def band(curves: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(centre, low, high) of curves (seeds, points) for one of BANDS; low and high are None for "none"."""
    return BANDS[kind][1](curves)
