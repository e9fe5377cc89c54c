"""Reading metric series, downsampled on the server to a bounded number of points.

A series of n points over steps [lo, hi] is returned as is when n <= max_points;
otherwise it is cut into at most max_points buckets of equal step width and each
bucket gives its first step, mean, min and max, so a one-point spike survives as
a bucket's max. Wide buckets are built from the stored MetricBucket aggregates
(a few thousand rows for a million points); narrow ones from the points.

A non-finite point (NaN, +inf, -inf) reads back as value null, and the series
lists it under "nonfinite" as [step, kind name] (rolloutlab/finite.py); the chart
draws a gap and a marker there. Downsampled values aggregate the finite points.
"""

from __future__ import annotations

import math

from django.db import connection

from rolloutlab import finite
from rolloutlab.metrics.models import BUCKET_STEPS, MetricBucket, MetricKey, MetricPoint

BACKFILL_LIMIT = 20_000  # points a reconnecting client may ask for before it should reload
# PostgreSQL refuses a float sum that overflows ("value out of range"), and values near the largest float (a
# diverging loss, anyone's external run) overflow a sum of two: means are taken of the values times 2^-20 (exact,
# a power of two), so a sum of a million of them fits, and scaled back (a mean is never past the largest float)
SCALE = 2.0**-20


def scaled_mean(total: str, count: str) -> str:
    """SQL for the mean of a group: sum(total) / sum(count), with no overflow of the sum."""
    return f"sum({total} * {SCALE!r}) / sum({count}) / {SCALE!r}"


def run_keys(run_id: int) -> list[str]:
    return sorted(metric_names([run_id]))


def metric_names(run_ids: list[int]) -> set[str]:
    """The metrics that any of these runs has logged, in one query (a compare page's picker, refreshed live)."""
    key_ids = MetricBucket.objects.filter(run_id__in=run_ids).values_list("key_id", flat=True).distinct()
    return set(MetricKey.objects.filter(id__in=key_ids).values_list("name", flat=True))


def read_series(run_id: int, names: list[str], max_points: int = 1000) -> dict[str, dict]:
    ids = dict(MetricKey.objects.filter(name__in=names).values_list("name", "id"))
    return {name: read_one(run_id, ids[name], max_points) for name in names if name in ids}


def read_one(run_id: int, key_id: int, max_points: int) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT sum(count), min(first_step), max(last_step) FROM {MetricBucket._meta.db_table} "
            "WHERE run_id = %s AND key_id = %s",
            [run_id, key_id],
        )
        count, lo, hi = cursor.fetchone()
        if not count:
            return empty()
        if count <= max_points:
            return raw_points(cursor, run_id, key_id)
        width = math.ceil((hi - lo + 1) / max_points)
        if width >= BUCKET_STEPS:
            width = math.ceil(width / BUCKET_STEPS) * BUCKET_STEPS  # whole stored buckets per output bucket
            return from_buckets(cursor, run_id, key_id, lo - lo % BUCKET_STEPS, width)
        return from_points(cursor, run_id, key_id, lo, width)


def empty() -> dict:
    return {"step": [], "value": [], "low": [], "high": [], "downsampled": False, "nonfinite": []}


def raw_points(cursor, run_id: int, key_id: int) -> dict:
    cursor.execute(
        f"SELECT step, value, kind FROM {MetricPoint._meta.db_table} WHERE run_id = %s AND key_id = %s ORDER BY step",
        [run_id, key_id],
    )
    rows = cursor.fetchall()
    values = [v for _, v, _ in rows]
    nonfinite = [[s, finite.name_of(k)] for s, _, k in rows if k]
    return {"step": [s for s, _, _ in rows], "value": values, "low": values, "high": values, "downsampled": False,
            "nonfinite": nonfinite}  # fmt: skip


def aggregated(rows, nonfinite: list | None = None) -> dict:
    return {
        "step": [r[0] for r in rows],
        "value": [finite.to_json(r[1]) for r in rows],  # a bucket whose total overflowed to ±inf: no mean
        "low": [r[2] for r in rows],
        "high": [r[3] for r in rows],
        "downsampled": True,
        "nonfinite": nonfinite or [],
    }


def from_points(cursor, run_id: int, key_id: int, lo: int, width: int) -> dict:
    cursor.execute(
        f"SELECT min(step), avg(value * {SCALE!r}) / {SCALE!r}, min(value), max(value) "
        f"FROM {MetricPoint._meta.db_table} "
        "WHERE run_id = %s AND key_id = %s GROUP BY (step - %s) / %s ORDER BY 1",
        [run_id, key_id, lo, width],
    )
    return aggregated(cursor.fetchall(), nonfinite_points(cursor, run_id, key_id))


def nonfinite_points(cursor, run_id: int, key_id: int, limit: int = 1000) -> list[list]:
    """[step, kind name] of the series' non-finite points (a few, in any sane run), so a
    downsampled chart still marks them."""
    cursor.execute(
        f"SELECT step, kind FROM {MetricPoint._meta.db_table} "
        "WHERE run_id = %s AND key_id = %s AND kind > 0 ORDER BY step LIMIT %s",
        [run_id, key_id, limit],
    )
    return [[s, finite.name_of(k)] for s, k in cursor.fetchall()]


def from_buckets(cursor, run_id: int, key_id: int, origin: int, width: int) -> dict:
    cursor.execute(
        f"SELECT min(first_step), {scaled_mean('total', 'count')}, min(low), max(high) "
        f"FROM {MetricBucket._meta.db_table} "
        "WHERE run_id = %s AND key_id = %s GROUP BY (bucket * %s - %s) / %s ORDER BY 1",
        [run_id, key_id, BUCKET_STEPS, origin, width],
    )
    return aggregated(cursor.fetchall(), nonfinite_points(cursor, run_id, key_id))


def points_after(run_id: int, resume: dict[str, int]) -> dict[str, list[list[float]]]:
    """Every point of the run past the step the client already has for its key: [[step, value], ...],
    a non-finite one as [step, null, kind name] (as the live messages send it)."""
    names = dict(MetricKey.objects.filter(id__in=_run_key_ids(run_id)).values_list("id", "name"))
    out: dict[str, list[list[float]]] = {}
    budget = BACKFILL_LIMIT
    for key_id, name in names.items():
        after = resume.get(name, -1)
        rows = list(
            MetricPoint.objects.filter(run_id=run_id, key_id=key_id, step__gt=after)
            .order_by("step")
            .values_list("step", "value", "kind")[:budget]
        )
        if rows:
            out[name] = [[s, v] if not k else [s, None, finite.name_of(k)] for s, v, k in rows]
            budget -= len(rows)
        if budget <= 0:
            break
    return out


def _run_key_ids(run_id: int):
    return MetricBucket.objects.filter(run_id=run_id).values_list("key_id", flat=True).distinct()


# ---------------------------------------------------------------------------------------------
# Many series at once, for the compare page: one query for all (run, key) pairs of a selection.

RAW_LIMIT = 400_000  # up to this many points in a selection, aggregate the points themselves


def read_many(run_ids: list[int], names: list[str], points: int = 300) -> dict[tuple[int, str], tuple[list, list]]:
    """{(run id, key name): (steps, means)} with at most about `points` points per series.

    Each output point is the mean step and mean value of an equal-width slice of
    the run's steps. Small selections are cut from the points; large ones from the
    stored buckets (slices of whole buckets, so never finer than BUCKET_STEPS).
    """
    if not run_ids or not names:
        return {}
    ids = dict(MetricKey.objects.filter(name__in=names).values_list("id", "name"))
    if not ids:
        return {}
    spans = series_spans(run_ids, list(ids))
    if not spans:
        return {}
    total = sum(count for count, _ in spans.values())
    per_run: dict[int, int] = {}
    for (run_id, _), (_, last) in spans.items():
        per_run[run_id] = max(per_run.get(run_id, 0), last)
    use_points = total <= RAW_LIMIT
    widths = {}
    for run_id, last in per_run.items():
        width = max(1, math.ceil((last + 1) / points))
        widths[run_id] = width if use_points else math.ceil(width / BUCKET_STEPS) * BUCKET_STEPS
    rows = slices_from_points(widths, list(ids)) if use_points else slices_from_buckets(widths, list(ids))
    out: dict[tuple[int, str], tuple[list, list]] = {}
    for run_id, key_id, step, value in rows:
        steps, values = out.setdefault((run_id, ids[key_id]), ([], []))
        steps.append(step)
        values.append(value)
    return out


def series_spans(run_ids: list[int], key_ids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """{(run, key): (point count, last step)} from the bucket aggregates."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT run_id, key_id, sum(count), max(last_step) FROM {MetricBucket._meta.db_table} "
            f"WHERE run_id IN ({_placeholders(run_ids)}) AND key_id IN ({_placeholders(key_ids)}) "
            "GROUP BY run_id, key_id",
            [*run_ids, *key_ids],
        )
        return {(r, k): (int(c), int(last)) for r, k, c, last in cursor.fetchall()}


def _placeholders(values: list) -> str:
    return ", ".join(["%s"] * len(values))


def _widths_table(widths: dict[int, int]) -> tuple[str, list]:
    """A common table expression `w(run_id, width)` giving each run its slice width (PostgreSQL and SQLite)."""
    rows = ", ".join(["(%s, %s)"] * len(widths))
    return f"WITH w(run_id, width) AS (VALUES {rows}) ", [v for pair in widths.items() for v in pair]


def slices_from_points(widths: dict[int, int], key_ids: list[int]) -> list[tuple]:
    with_widths, params = _widths_table(widths)
    with connection.cursor() as cursor:
        cursor.execute(
            f"{with_widths}SELECT p.run_id, p.key_id, avg(p.step), avg(p.value * {SCALE!r}) / {SCALE!r} "
            f"FROM {MetricPoint._meta.db_table} p "
            f"JOIN w ON p.run_id = w.run_id WHERE p.key_id IN ({_placeholders(key_ids)}) "
            "GROUP BY p.run_id, p.key_id, p.step / w.width ORDER BY 1, 2, 3",
            [*params, *key_ids],
        )
        return cursor.fetchall()


def slices_from_buckets(widths: dict[int, int], key_ids: list[int]) -> list[tuple]:
    with_widths, params = _widths_table(widths)
    with connection.cursor() as cursor:
        cursor.execute(
            f"{with_widths}SELECT b.run_id, b.key_id, "  # float8 arithmetic: numeric would be several times slower
            "sum(CAST(b.first_step + b.last_step AS DOUBLE PRECISION) * 0.5 * b.count) / sum(b.count), "
            f"{scaled_mean('b.total', 'b.count')} "
            f"FROM {MetricBucket._meta.db_table} b "
            f"JOIN w ON b.run_id = w.run_id WHERE b.key_id IN ({_placeholders(key_ids)}) "
            f"GROUP BY b.run_id, b.key_id, b.bucket * {BUCKET_STEPS} / w.width ORDER BY 1, 2, 3",
            [*params, *key_ids],
        )
        return cursor.fetchall()


def first_reaching(run_ids: list[int], name: str, target: float) -> dict[int, int]:
    """{run id: the first step whose value is >= target} for the runs that reached it.

    The first such point lies in the first bucket whose max reaches the target, so
    only that bucket's points are read, not the whole series.
    """
    key = MetricKey.objects.filter(name=name).values_list("id", flat=True).first()
    if key is None or not run_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH f(run_id, bucket) AS (SELECT run_id, min(bucket) FROM {MetricBucket._meta.db_table} "
            f"WHERE run_id IN ({_placeholders(run_ids)}) AND key_id = %s AND high >= %s GROUP BY run_id) "
            f"SELECT p.run_id, min(p.step) FROM {MetricPoint._meta.db_table} p JOIN f ON p.run_id = f.run_id "
            "WHERE p.key_id = %s AND p.step >= f.bucket * %s AND p.step < (f.bucket + 1) * %s AND p.value >= %s "
            "GROUP BY p.run_id",
            [*run_ids, key, target, key, BUCKET_STEPS, BUCKET_STEPS, target],
        )
        return dict(cursor.fetchall())


def values_at(pairs: list[tuple[int, int]], name: str) -> dict[int, float]:
    """{run id: value of the key at that run's step}, for (run id, step) pairs; missing and non-finite
    points are left out."""
    key = MetricKey.objects.filter(name=name).values_list("id", flat=True).first()
    if key is None or not pairs:
        return {}
    condition = " OR ".join(["(run_id = %s AND step = %s)"] * len(pairs))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT run_id, value FROM {MetricPoint._meta.db_table} "
            f"WHERE key_id = %s AND value IS NOT NULL AND ({condition})",
            [key, *[v for pair in pairs for v in pair]],
        )
        return dict(cursor.fetchall())


def last_values(run_id: int, name: str, count: int) -> list[tuple[int, float | None]]:
    """The metric's last `count` points of the run, newest first, as (step, value); None where not finite."""
    key = MetricKey.objects.filter(name=name).values_list("id", flat=True).first()
    if key is None:
        return []
    rows = MetricPoint.objects.filter(run_id=run_id, key_id=key).order_by("-step").values_list("step", "value")
    return list(rows[:count])
