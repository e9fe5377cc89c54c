"""The statistics of the compare page, against values worked out by hand, against rliable's own
implementation, and by simulation: an interval covers the true value at about its stated rate."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from rolloutlab.compare import stats


def test_iqm_is_the_mean_of_the_middle_half():
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 8]) == 4.5  # drops 1, 2 and 7, 8
    assert stats.iqm([0, 0, 1, 1, 1, 1, 100, 100]) == 1.0  # where the mean is 25.5
    assert stats.mean([0, 0, 1, 1, 1, 1, 100, 100]) == 25.5
    # runs x tasks: pooled over both, as rliable does
    assert stats.iqm([[1, 5], [2, 6], [3, 7], [4, 8]]) == 4.5


def test_probability_of_improvement_counts_pairs_and_half_ties():
    assert stats.probability_of_improvement([3, 4], [1, 2]) == 1.0
    assert stats.probability_of_improvement([1, 2], [3, 4]) == 0.0
    # pairs (1,2) (1,2) (2,2) (2,2) (3,2) (3,2): wins 2, ties 2 -> (2 + 0.5 * 2) / 6
    assert stats.probability_of_improvement([1, 2, 3], [2, 2]) == 0.5
    # two tasks: 1.0 on the first, 0.0 on the second -> 0.5
    assert stats.probability_of_improvement([[3, 0], [4, 0]], [[1, 1], [2, 1]]) == 0.5


def test_the_interval_of_two_values_is_their_range():
    # resamples of [0, 1]: {0,0} {0,1} {1,0} {1,1} -> IQM 0, .5, .5, 1 (n=2 trims nothing)
    low, high = stats.interval([0.0, 1.0], stats.iqm, reps=4000)
    assert (low, high) == (0.0, 1.0)


def test_equal_scores_have_a_degenerate_interval():
    assert stats.interval([0.7] * 6, stats.iqm) == (0.7, 0.7)
    assert stats.improvement_interval([1.0] * 4, [1.0] * 4) == (0.5, 0.5)


def test_a_single_run_has_no_interval():
    assert all(np.isnan(stats.interval([0.5], stats.iqm)))


def test_resampling_is_stratified_by_task():
    scores = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0]])
    resamples = stats.stratified_resamples(scores, 500, np.random.default_rng(0))
    assert resamples.shape == (500, 3, 2)
    assert set(np.unique(resamples[:, :, 0])) <= {0.0, 1.0, 2.0}  # a task's column only holds its own runs
    assert set(np.unique(resamples[:, :, 1])) <= {10.0, 11.0, 12.0}


def coverage(draw, statistic_interval, truth, trials=300, seed=1):
    rng = np.random.default_rng(seed)
    hits = 0
    for trial in range(trials):
        low, high = statistic_interval(draw(rng), trial)
        hits += low <= truth <= high
    return hits / trials


def test_the_iqm_interval_covers_the_true_iqm_about_95_percent_of_the_time():
    # the IQM of a normal distribution is its mean
    rate = coverage(lambda rng: rng.normal(3.0, 1.0, 30), lambda s, t: stats.interval(s, stats.iqm, 1000, t), 3.0)
    assert 0.89 <= rate <= 0.99, rate


def test_the_improvement_interval_covers_the_true_probability_about_95_percent_of_the_time():
    truth = scipy_stats.norm.cdf(0.5 / np.sqrt(2))  # P(X > Y) for X ~ N(0.5, 1), Y ~ N(0, 1)

    def draw(rng):
        return rng.normal(0.5, 1, 25), rng.normal(0.0, 1, 25)

    rate = coverage(draw, lambda xy, t: stats.improvement_interval(*xy, 1000, t), truth)
    assert 0.89 <= rate <= 0.99, rate


def test_the_mean_band_is_a_t_interval():
    curves = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 4.0]])
    centre, low, high = stats.mean_band(curves)
    half = scipy_stats.t.ppf(0.975, 2) * np.std([1, 3, 5], ddof=1) / np.sqrt(3)
    assert centre[0] == 3.0 and low[0] == pytest.approx(3 - half) and high[0] == pytest.approx(3 + half)
    half = scipy_stats.t.ppf(0.975, 1) * np.std([2, 4], ddof=1) / np.sqrt(2)
    assert centre[1] == 3.0 and high[1] == pytest.approx(3 + half)


# three seeds at two points; the second point has one seed missing, the third only one seed
BAND_CURVES = np.array([[0.0, 1.0, 7.0], [3.0, np.nan, np.nan], [6.0, 5.0, np.nan]])


def test_the_standard_error_band_is_the_mean_plus_or_minus_one_standard_error():
    centre, low, high = stats.band(BAND_CURVES, "se")
    se = 3.0 / np.sqrt(3)  # [0, 3, 6]: sample std 3
    assert centre[0] == 3.0 and low[0] == pytest.approx(3 - se) and high[0] == pytest.approx(3 + se)
    assert low[1] == pytest.approx(1.0) and high[1] == pytest.approx(5.0)  # [1, 5]: std 2*sqrt(2), se 2
    assert np.isnan(low[2]) and np.isnan(high[2]) and centre[2] == 7.0  # one seed: no spread to show


def test_the_min_max_band_spans_the_lowest_and_highest_seed():
    centre, low, high = stats.band(BAND_CURVES, "minmax")
    assert list(centre[:2]) == [3.0, 3.0] and list(low[:2]) == [0.0, 1.0] and list(high[:2]) == [6.0, 5.0]
    assert np.isnan(low[2]) and np.isnan(high[2])


def test_the_ci_band_is_the_t_interval_and_none_draws_no_band():
    centre, low, high = stats.band(BAND_CURVES, "ci")
    half = scipy_stats.t.ppf(0.975, 2) * 3.0 / np.sqrt(3)  # 4.30 standard errors at three seeds
    assert low[0] == pytest.approx(3 - half) and high[0] == pytest.approx(3 + half)
    centre, low, high = stats.band(BAND_CURVES, "none")
    assert list(centre) == [3.0, 3.0, 7.0] and low is None and high is None


def test_at_few_seeds_the_default_band_is_narrower_than_the_t_interval():
    two_seeds = np.array([[0.0], [1.0]])
    _, ci_low, ci_high = stats.band(two_seeds, "ci")
    _, low, high = stats.band(two_seeds, stats.DEFAULT_BAND)
    assert (low[0], high[0]) == (0.0, 1.0)
    assert ci_high[0] - ci_low[0] == pytest.approx(scipy_stats.t.ppf(0.975, 1) * (high[0] - low[0]))  # 12.7x


def test_point_estimates_match_rliable():
    from rliable import metrics as rl

    rng = np.random.default_rng(7)
    x, y = rng.normal(0.6, 0.2, (12, 3)), rng.normal(0.5, 0.2, (9, 3))
    assert stats.iqm(x) == pytest.approx(rl.aggregate_iqm(x))
    assert stats.mean(x) == pytest.approx(rl.aggregate_mean(x))
    assert stats.probability_of_improvement(x, y) == pytest.approx(rl.probability_of_improvement(x, y))


def test_intervals_match_rliable_within_resampling_noise():
    from rliable import library as rly
    from rliable import metrics as rl

    rng = np.random.default_rng(3)
    scores = rng.gamma(2.0, 0.2, (15, 2))  # skewed, two tasks
    theirs = rly.get_interval_estimates({"a": scores}, lambda s: np.array([rl.aggregate_iqm(s)]), reps=20000)[1]["a"]
    low, high = stats.interval(scores, stats.iqm, reps=20000)
    assert low == pytest.approx(theirs[0][0], abs=0.01) and high == pytest.approx(theirs[1][0], abs=0.01)
