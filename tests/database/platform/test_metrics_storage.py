"""Metric storage: COPY ingest with bucket aggregates, and downsampled reads that keep spikes."""

import math

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError

from rolloutlab.metrics.ingest import bucket_rows, copy_payload, write_points
from rolloutlab.metrics.models import BUCKET_STEPS, MetricBucket, MetricPoint
from rolloutlab.metrics.series import points_after, read_series, run_keys
from rolloutlab.runs.models import Run
from tests.conftest import project_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    user = get_user_model().objects.create_user("writer")
    project = project_of(user)
    return Run.objects.create(project=project, name="r", owner=user, config={}, config_hash="0" * 64)


def write_series(run, key, values, start=0):
    write_points(run.id, [(key, start + i, v, 1.0) for i, v in enumerate(values)])


def test_points_are_written_and_read_back_exactly(run):
    write_series(run, "reward/mean", [0.5, 0.25, 0.75])
    write_series(run, "policy/loss", [1.0, 2.0])
    assert MetricPoint.objects.filter(run=run).count() == 5
    series = read_series(run.id, ["reward/mean", "missing"], max_points=100)
    assert series == {"reward/mean": {"step": [0, 1, 2], "value": [0.5, 0.25, 0.75], "low": [0.5, 0.25, 0.75],
                                      "high": [0.5, 0.25, 0.75], "downsampled": False, "nonfinite": []}}  # fmt: skip
    assert run_keys(run.id) == ["policy/loss", "reward/mean"]


def test_buckets_hold_min_max_sum_count_across_writes(run):
    write_series(run, "k", [1.0, 5.0, 3.0])
    write_series(run, "k", [-2.0, 4.0], start=3)  # the same bucket, a second transaction
    bucket = MetricBucket.objects.get(run=run)
    assert (bucket.first_step, bucket.last_step, bucket.count) == (0, 4, 5)
    assert (bucket.total, bucket.low, bucket.high) == (11.0, -2.0, 5.0)


def test_bucket_rows_match_a_plain_loop():
    rng = np.random.default_rng(0)
    keys, steps = rng.integers(1, 4, 2000), rng.permutation(2000) * 3
    values = rng.standard_normal(2000)
    expected = {}
    for k, s, v in zip(keys.tolist(), steps.tolist(), values.tolist()):
        b = expected.setdefault((k, s // BUCKET_STEPS), [s, s, 0, 0.0, v, v])
        b[0], b[1], b[2], b[3], b[4], b[5] = min(b[0], s), max(b[1], s), b[2] + 1, b[3] + v, min(b[4], v), max(b[5], v)
    rows = bucket_rows(7, keys, steps, values)
    got = {(r[1], r[2]): list(r[3:]) for r in rows}
    assert got.keys() == expected.keys() and all(r[0] == 7 for r in rows)
    for bucket, aggregate in expected.items():
        assert got[bucket] == pytest.approx(aggregate)


def test_the_copy_payload_is_postgres_binary_format():
    payload = copy_payload(3, np.array([5]), np.array([7]), np.array([0.5]), np.array([1.0]))
    assert payload.startswith(b"PGCOPY\n\xff\r\n\x00") and payload.endswith(b"\xff\xff")
    assert len(payload) == 19 + 2 + 6 * 4 + 8 + 8 + 4 + 8 + 8 + 2 + 2


def test_a_non_finite_value_is_a_null_row_in_the_copy_payload():
    payload = copy_payload(3, np.array([5]), np.array([7]), np.array([math.nan]), np.array([1.0]))
    assert len(payload) == 19 + 2 + 6 * 4 + 8 + 8 + 4 + 8 + 2 + 2  # no value bytes
    assert b"\xff\xff\xff\xff" in payload  # the value's length is -1: NULL


def test_non_finite_values_are_stored_as_null_with_their_kind_and_read_back_flagged(run):
    write_series(run, "policy/loss", [1.0, math.nan, 3.0, math.inf, -math.inf, 2.0])
    stored = list(MetricPoint.objects.filter(run=run).order_by("step").values_list("step", "value", "kind"))
    assert stored == [(0, 1.0, 0), (1, None, 1), (2, 3.0, 0), (3, None, 2), (4, None, 3), (5, 2.0, 0)]
    series = read_series(run.id, ["policy/loss"])["policy/loss"]
    assert series["value"] == [1.0, None, 3.0, None, None, 2.0]
    assert series["nonfinite"] == [[1, "nan"], [3, "+inf"], [4, "-inf"]]
    bucket = MetricBucket.objects.get(run=run)  # the aggregates hold the finite values only
    assert (bucket.count, bucket.total, bucket.low, bucket.high) == (3, 6.0, 1.0, 3.0)
    assert points_after(run.id, {"policy/loss": 2}) == {"policy/loss": [[3, None, "+inf"], [4, None, "-inf"], [5, 2.0]]}


def test_a_downsampled_series_still_lists_its_non_finite_points(run):
    values = [float(i % 7) for i in range(5_000)]
    values[1234] = math.nan
    write_series(run, "k", values)
    series = read_series(run.id, ["k"], max_points=100)["k"]
    assert series["downsampled"] and len(series["step"]) <= 100
    assert series["nonfinite"] == [[1234, "nan"]]
    assert all(v is not None and math.isfinite(v) for v in series["value"])


def test_a_write_that_skips_stored_points_is_idempotent(run):
    write_series(run, "k", [1.0, 2.0])
    written = write_points(run.id, [("k", 1, 2.0, 0.0), ("k", 2, math.nan, 0.0), ("j", 1, 5.0, 0.0)],
                           skip_stored=True)  # fmt: skip
    assert written == 2  # (k, 1) was there already
    stored = MetricPoint.objects.filter(run=run).order_by("key__name", "step")
    assert list(stored.values_list("key__name", "step", "kind")) == [("j", 1, 0), ("k", 0, 0), ("k", 1, 0), ("k", 2, 1)]
    assert write_points(run.id, [("k", 2, math.nan, 0.0), ("j", 1, 5.0, 0.0)], skip_stored=True) == 0
    assert sorted(MetricBucket.objects.filter(run=run).values_list("count", flat=True)) == [1, 2]


def test_a_duplicate_point_is_refused_and_nothing_of_its_batch_is_kept(run):
    write_series(run, "k", [1.0])
    with pytest.raises(IntegrityError):
        write_points(run.id, [("k", 5, 2.0, 0.0), ("k", 0, 9.0, 0.0)])
    assert list(MetricPoint.objects.filter(run=run).values_list("step", "value")) == [(0, 1.0)]
    assert MetricBucket.objects.get(run=run).count == 1


@pytest.mark.parametrize("length", [5_000, 100_000])  # the points path and the buckets path
def test_downsampling_bounds_the_points_and_keeps_a_one_point_spike(run, length):
    values = [math.sin(i / 500) for i in range(length)]
    values[length // 3] = 100.0
    write_series(run, "loss", values)
    series = read_series(run.id, ["loss"], max_points=500)["loss"]
    assert series["downsampled"] and len(series["step"]) <= 500
    assert max(series["high"]) == 100.0
    assert max(series["value"]) < 100.0  # the mean alone would hide it
    assert min(series["low"]) == pytest.approx(min(values))
    assert series["step"] == sorted(series["step"]) and series["step"][0] == 0


def test_downsampled_means_match_the_points(run):
    values = [float(i % 7) for i in range(1000)]
    write_series(run, "k", values)
    series = read_series(run.id, ["k"], max_points=100)["k"]
    width = 10  # 1000 steps into 100 buckets
    for i, start in enumerate(series["step"]):
        assert start == i * width
        assert series["value"][i] == pytest.approx(sum(values[start : start + width]) / width)


def test_points_after_resumes_per_key(run):
    write_series(run, "a", [1.0, 2.0, 3.0])
    write_series(run, "b", [4.0, 5.0])
    assert points_after(run.id, {"a": 1, "b": -1}) == {"a": [[2, 3.0]], "b": [[0, 4.0], [1, 5.0]]}
    assert points_after(run.id, {"a": 2, "b": 1}) == {}


def test_first_reaching_finds_the_first_step_at_or_above_the_target(run):
    from rolloutlab.metrics.series import first_reaching

    values = [0.0] * 1000
    values[700] = 0.9  # the first crossing, in bucket 5
    values[300] = 0.49  # close, not enough
    values[900] = 2.0
    write_series(run, "k", values)
    assert first_reaching([run.id], "k", 0.5) == {run.id: 700}
    assert first_reaching([run.id], "k", 1.5) == {run.id: 900}
    assert first_reaching([run.id], "k", 3.0) == {}
