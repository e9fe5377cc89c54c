"""Reading metric series, downsampled on the server to a bounded number of points.

A series of n points over steps [lo, hi] is returned as is when n <= max_points;
otherwise it is cut into at most max_points buckets of equal step width and each
bucket gives its first step, mean, min and max, so a one-point spike survives as
a bucket's max. Wide buckets are built from the stored MetricBucket aggregates
(a few thousand rows for a million points); narrow ones from the points.
"""

from __future__ import annotations

import math

from django.db import connection

from rolloutlab.metrics.models import BUCKET_STEPS, MetricBucket, MetricKey, MetricPoint

BACKFILL_LIMIT = 20_000  # points a reconnecting client may ask for before it should reload


def run_keys(run_id: int) -> list[str]:
    key_ids = MetricBucket.objects.filter(run_id=run_id).values_list("key_id", flat=True).distinct()
    return sorted(MetricKey.objects.filter(id__in=key_ids).values_list("name", flat=True))


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
    return {"step": [], "value": [], "low": [], "high": [], "downsampled": False}


def raw_points(cursor, run_id: int, key_id: int) -> dict:
    cursor.execute(
        f"SELECT step, value FROM {MetricPoint._meta.db_table} WHERE run_id = %s AND key_id = %s ORDER BY step",
        [run_id, key_id],
    )
    rows = cursor.fetchall()
    values = [v for _, v in rows]
    return {"step": [s for s, _ in rows], "value": values, "low": values, "high": values, "downsampled": False}


def aggregated(rows) -> dict:
    return {
        "step": [r[0] for r in rows],
        "value": [r[1] for r in rows],
        "low": [r[2] for r in rows],
        "high": [r[3] for r in rows],
        "downsampled": True,
    }


def from_points(cursor, run_id: int, key_id: int, lo: int, width: int) -> dict:
    cursor.execute(
        f"SELECT min(step), avg(value), min(value), max(value) FROM {MetricPoint._meta.db_table} "
        "WHERE run_id = %s AND key_id = %s GROUP BY (step - %s) / %s ORDER BY 1",
        [run_id, key_id, lo, width],
    )
    return aggregated(cursor.fetchall())


def from_buckets(cursor, run_id: int, key_id: int, origin: int, width: int) -> dict:
    cursor.execute(
        f"SELECT min(first_step), sum(total) / sum(count), min(low), max(high) FROM {MetricBucket._meta.db_table} "
        "WHERE run_id = %s AND key_id = %s GROUP BY (bucket * %s - %s) / %s ORDER BY 1",
        [run_id, key_id, BUCKET_STEPS, origin, width],
    )
    return aggregated(cursor.fetchall())


def points_after(run_id: int, resume: dict[str, int]) -> dict[str, list[list[float]]]:
    """Every point of the run past the step the client already has for its key: [[step, value], ...]."""
    names = dict(MetricKey.objects.filter(id__in=_run_key_ids(run_id)).values_list("id", "name"))
    out: dict[str, list[list[float]]] = {}
    budget = BACKFILL_LIMIT
    for key_id, name in names.items():
        after = resume.get(name, -1)
        rows = list(
            MetricPoint.objects.filter(run_id=run_id, key_id=key_id, step__gt=after)
            .order_by("step")
            .values_list("step", "value")[:budget]
        )
        if rows:
            out[name] = [[s, v] for s, v in rows]
            budget -= len(rows)
        if budget <= 0:
            break
    return out


def _run_key_ids(run_id: int):
    return MetricBucket.objects.filter(run_id=run_id).values_list("key_id", flat=True).distinct()
