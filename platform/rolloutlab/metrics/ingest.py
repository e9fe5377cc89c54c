"""Writing metric points: binary COPY into PostgreSQL (bulk INSERT on SQLite), bucket aggregates kept current.

    write_columns(run_id, names, steps, values, walls)       # columns of equal length
    write_points(run_id, [("reward/mean", 3, 0.41, 1718000000.0), ...])

One call is one transaction: the points and their bucket aggregates commit together,
so a reader never sees a bucket ahead of its points or the reverse. The COPY
payload and the bucket sums are built with NumPy, not row by row in Python: at
100,000 points a flush, per-point Python work would cost more than the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from django.db import connection, transaction

from rolloutlab.metrics.models import BUCKET_STEPS, MetricBucket, MetricKey, MetricPoint

Row = tuple[str, int, float, float]  # (key name, step, value, wall time)

# One row of PostgreSQL's binary COPY format: a field count, then (length, big-endian value) per column.
COPY_ROW = np.dtype([
    ("fields", ">i2"),
    ("run_len", ">i4"), ("run", ">i8"),
    ("key_len", ">i4"), ("key", ">i8"),
    ("step_len", ">i4"), ("step", ">i4"),
    ("value_len", ">i4"), ("value", ">f8"),
    ("wall_len", ">i4"), ("wall", ">f8"),
])  # fmt: skip
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"  # signature, flags, extension
COPY_TRAILER = b"\xff\xff"


def key_ids(names: Iterable[str]) -> dict[str, int]:
    """Ids of the metric keys, creating the ones never seen before.

    Looked up on every write, never cached: a flush names a few dozen keys, the
    query costs well under a millisecond, and no cache can go stale.
    """
    wanted = set(names)
    found = dict(MetricKey.objects.filter(name__in=wanted).values_list("name", "id"))
    if len(found) < len(wanted):
        MetricKey.objects.bulk_create([MetricKey(name=n) for n in wanted - found.keys()], ignore_conflicts=True)
        found = dict(MetricKey.objects.filter(name__in=wanted).values_list("name", "id"))
    return found


def write_points(run_id: int, rows: Sequence[Row]) -> None:
    if rows:
        names, steps, values, walls = zip(*rows)
        write_columns(run_id, names, steps, values, walls)


def write_columns(run_id: int, names: Sequence[str], steps, values, walls) -> None:
    if not len(names):
        return
    ids = key_ids(dict.fromkeys(names))
    keys = np.array([ids[n] for n in names], dtype=np.int64)
    # in primary-key order, so the index grows at its right edge: COPY is a third faster
    order = np.lexsort((np.asarray(steps), keys))
    keys, steps = keys[order], np.asarray(steps, dtype=np.int64)[order]
    values, walls = np.asarray(values, dtype=np.float64)[order], np.asarray(walls, dtype=np.float64)[order]
    with transaction.atomic():
        if connection.vendor == "postgresql":
            copy_points(run_id, keys, steps, values, walls)
        else:
            MetricPoint.objects.bulk_create(
                [MetricPoint(run_id=run_id, key_id=int(k), step=int(s), value=float(v), wall_time=float(w))
                 for k, s, v, w in zip(keys, steps, values, walls)],
                batch_size=2000,
            )  # fmt: skip
        upsert_buckets(bucket_rows(run_id, keys, steps, values))


def copy_payload(run_id: int, keys, steps, values, walls) -> bytes:
    rows = np.empty(len(keys), dtype=COPY_ROW)
    rows["fields"] = 5
    rows["run_len"], rows["key_len"], rows["step_len"] = 8, 8, 4
    rows["value_len"], rows["wall_len"] = 8, 8
    rows["run"], rows["key"], rows["step"], rows["value"], rows["wall"] = run_id, keys, steps, values, walls
    return COPY_HEADER + rows.tobytes() + COPY_TRAILER


def copy_points(run_id: int, keys, steps, values, walls) -> None:
    table = MetricPoint._meta.db_table
    payload = copy_payload(run_id, keys, steps, values, walls)
    with connection.cursor() as cursor, connection.wrap_database_errors:  # psycopg errors as Django's
        raw = cursor.cursor  # psycopg 3's own cursor: Django's wrapper has no copy()
        with raw.copy(f"COPY {table} (run_id, key_id, step, value, wall_time) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(payload)


def bucket_rows(run_id: int, keys, steps, values) -> list[tuple]:
    """(run, key, bucket, first_step, last_step, count, total, low, high) for each bucket the points touch."""
    keys, steps, values = np.asarray(keys), np.asarray(steps), np.asarray(values)
    buckets = steps // BUCKET_STEPS
    order = np.lexsort((buckets, keys))
    keys, buckets, steps, values = keys[order], buckets[order], steps[order], values[order]
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]) | (buckets[1:] != buckets[:-1])])
    columns = (
        keys[starts],
        buckets[starts],
        np.minimum.reduceat(steps, starts),
        np.maximum.reduceat(steps, starts),
        np.diff(np.r_[starts, len(steps)]),
        np.add.reduceat(values, starts),
        np.minimum.reduceat(values, starts),
        np.maximum.reduceat(values, starts),
    )
    return [(run_id, *row) for row in zip(*(c.tolist() for c in columns))]


def upsert_buckets(rows: list[tuple]) -> None:
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
