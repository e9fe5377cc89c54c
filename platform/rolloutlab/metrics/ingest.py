"""Writing metric points: COPY into PostgreSQL (bulk INSERT on SQLite), bucket aggregates kept current.

    write_points(run_id, [("reward/mean", 3, 0.41, 1718000000.0), ...])

One call is one transaction: the points and their bucket aggregates commit together,
so a reader never sees a bucket ahead of its points or the reverse.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction

from rolloutlab.metrics.models import BUCKET_STEPS, MetricBucket, MetricKey, MetricPoint

Row = tuple[str, int, float, float]  # (key name, step, value, wall time)

_key_ids: dict[str, int] = {}  # per process, filled only with committed keys: a key's id never changes


def key_ids(names: Iterable[str]) -> dict[str, int]:
    """Ids of the metric keys, creating the ones never seen before."""
    wanted = set(names)
    missing = sorted(wanted - _key_ids.keys())
    if not missing:
        return _key_ids
    MetricKey.objects.bulk_create([MetricKey(name=n) for n in missing], ignore_conflicts=True)
    found = dict(MetricKey.objects.filter(name__in=missing).values_list("name", "id"))
    transaction.on_commit(lambda: _key_ids.update(found))  # a rolled-back key must not be remembered
    return {**_key_ids, **found}


def write_points(run_id: int, rows: list[Row]) -> None:
    if not rows:
        return
    ids = key_ids(name for name, *_ in rows)
    points = [(run_id, ids[name], step, float(value), wall) for name, step, value, wall in rows]
    with transaction.atomic():
        if connection.vendor == "postgresql":
            copy_points(points)
        else:
            MetricPoint.objects.bulk_create(
                [MetricPoint(run_id=r, key_id=k, step=s, value=v, wall_time=w) for r, k, s, v, w in points],
                batch_size=2000,
            )
        upsert_buckets(run_id, points)


def copy_points(points: list[tuple]) -> None:
    table = MetricPoint._meta.db_table
    with connection.cursor() as cursor, connection.wrap_database_errors:  # psycopg errors as Django's
        raw = cursor.cursor  # psycopg 3's own cursor: Django's wrapper has no copy()
        with raw.copy(f"COPY {table} (run_id, key_id, step, value, wall_time) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int8", "int4", "float8", "float8"])
            for point in points:
                copy.write_row(point)


def bucket_rows(run_id: int, points: list[tuple]) -> list[tuple]:
    """(run, key, bucket, first_step, last_step, count, total, low, high) for each bucket the points touch."""
    buckets: dict[tuple[int, int], list] = {}
    for _, key, step, value, _ in points:
        agg = buckets.get((key, step // BUCKET_STEPS))
        if agg is None:
            buckets[(key, step // BUCKET_STEPS)] = [step, step, 1, value, value, value]
        else:
            agg[0], agg[1] = min(agg[0], step), max(agg[1], step)
            agg[2] += 1
            agg[3] += value
            agg[4], agg[5] = min(agg[4], value), max(agg[5], value)
    return [(run_id, key, bucket, *agg) for (key, bucket), agg in buckets.items()]


def upsert_buckets(run_id: int, points: list[tuple]) -> None:
    rows = bucket_rows(run_id, points)
    table = MetricBucket._meta.db_table
    lesser, greater = ("LEAST", "GREATEST") if connection.vendor == "postgresql" else ("MIN", "MAX")
    columns = "run_id, key_id, bucket, first_step, last_step, count, total, low, high"
    merge = (
        f"first_step = {lesser}({table}.first_step, excluded.first_step), "
        f"last_step = {greater}({table}.last_step, excluded.last_step), "
        f"count = {table}.count + excluded.count, total = {table}.total + excluded.total, "
        f"low = {lesser}({table}.low, excluded.low), high = {greater}({table}.high, excluded.high)"
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {table} ({columns}) SELECT * FROM unnest("
                "%s::bigint[], %s::bigint[], %s::int[], %s::int[], %s::int[], %s::int[], "
                "%s::float8[], %s::float8[], %s::float8[]) "
                f"ON CONFLICT (run_id, key_id, bucket) DO UPDATE SET {merge}",
                [list(column) for column in zip(*rows)],
            )
        else:
            cursor.executemany(
                f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                f"ON CONFLICT (run_id, key_id, bucket) DO UPDATE SET {merge}",
                rows,
            )
