"""Writing metric points: binary COPY into PostgreSQL (bulk INSERT on SQLite), bucket aggregates kept current.

    write_columns(run_id, names, steps, values, walls)       # columns of equal length
    write_points(run_id, [("reward/mean", 3, 0.41, 1718000000.0), ...])
    write_new_columns(run_id, names, steps, values, walls)   # skips (key, step) already stored

One call is one transaction: the points and their bucket aggregates commit together,
so a reader never sees a bucket ahead of its points or the reverse. A non-finite
value is stored as NULL with its kind (rolloutlab/finite.py) and left out of the
buckets. `skip_stored=True` makes a write idempotent: points whose (run, key, step)
is already stored are left out, so a retried flush whose first try did commit
(the acknowledgement was lost) writes nothing twice. The COPY
payload and the bucket sums are built with NumPy, not row by row in Python: at
100,000 points a flush, per-point Python work would cost more than the database.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

import numpy as np
from django.db import connection, transaction

from rolloutlab import finite
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
    ("kind_len", ">i4"), ("kind", ">i2"),
])  # fmt: skip
# A row whose value is NULL: its length is -1 and no bytes follow. Rows are independent in
# the stream, so the two fixed layouts are simply written one after the other.
COPY_NULL_ROW = np.dtype([
    ("fields", ">i2"),
    ("run_len", ">i4"), ("run", ">i8"),
    ("key_len", ">i4"), ("key", ">i8"),
    ("step_len", ">i4"), ("step", ">i4"),
    ("value_len", ">i4"),
    ("wall_len", ">i4"), ("wall", ">f8"),
    ("kind_len", ">i4"), ("kind", ">i2"),
])  # fmt: skip
COPY_COLUMNS = "run_id, key_id, step, value, wall_time, kind"
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


def write_points(run_id: int, rows: Sequence[Row], skip_stored: bool = False) -> int:
    if not rows:
        return 0
    names, steps, values, walls = zip(*rows)
    return write_columns(run_id, names, steps, values, walls, skip_stored=skip_stored)


def write_columns(run_id: int, names: Sequence[str], steps, values, walls, skip_stored: bool = False) -> int:
    """Store the points in one transaction; returns how many were written (fewer with skip_stored)."""
    if not len(names):
        return 0
    ids = key_ids(dict.fromkeys(names))
    keys = np.array([ids[n] for n in names], dtype=np.int64)
    # in primary-key order, so the index grows at its right edge: COPY is a third faster
    order = np.lexsort((np.asarray(steps), keys))
    keys, steps = keys[order], np.asarray(steps, dtype=np.int64)[order]
    values, walls = np.asarray(values, dtype=np.float64)[order], np.asarray(walls, dtype=np.float64)[order]
    with transaction.atomic():
        if skip_stored:
            fresh = ~stored_mask(run_id, keys, steps)
            keys, steps, values, walls = keys[fresh], steps[fresh], values[fresh], walls[fresh]
            if not len(keys):
                return 0
        kinds = finite.kinds(values)
        if connection.vendor == "postgresql":
            copy_points(run_id, keys, steps, values, walls, kinds)
        else:
            MetricPoint.objects.bulk_create(
                [MetricPoint(run_id=run_id, key_id=int(k), step=int(s), value=float(v) if not c else None,
                             wall_time=float(w), kind=int(c))
                 for k, s, v, w, c in zip(keys, steps, values, walls, kinds)],
                batch_size=2000,
            )  # fmt: skip
        ok = kinds == finite.FINITE
        if ok.any():
            upsert_buckets(bucket_rows(run_id, keys[ok], steps[ok], values[ok]))
    return len(keys)


def write_new_columns(run_id: int, names: Sequence[str], steps, values, walls) -> tuple[list, list, list]:
    """Store the points whose (key, step) the run does not hold yet; return those (names, steps, values).

    For clients that send a batch again when its answer was lost: INSERT .. ON CONFLICT DO
    NOTHING instead of COPY (which cannot skip), and bucket aggregates from the inserted
    rows only, so a point sent twice is stored and counted once. The first value sent wins.
    """
    if not len(names):
        return [], [], []
    ids = key_ids(dict.fromkeys(names))
    keys = np.array([ids[n] for n in names], dtype=np.int64)
    order = np.lexsort((np.asarray(steps), keys))
    values = np.asarray(values, dtype=np.float64)[order]
    kinds = finite.kinds(values)  # a non-finite value is stored NULL with its kind, as COPY stores it
    columns = [
        keys[order].tolist(),
        np.asarray(steps, dtype=np.int64)[order].tolist(),
        [float(v) if not c else None for v, c in zip(values, kinds)],
        np.asarray(walls, dtype=np.float64)[order].tolist(),
        kinds.tolist(),
    ]
    table = MetricPoint._meta.db_table
    insert = f"INSERT INTO {table} (run_id, key_id, step, value, wall_time, kind)"
    skip = "ON CONFLICT DO NOTHING RETURNING key_id, step, value, kind"
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"{insert} SELECT %s, * FROM unnest(%s::bigint[], %s::int[], %s::float8[], %s::float8[], %s::int2[]) "
                + skip,
                [run_id, *columns],
            )
            stored = cursor.fetchall()
        else:
            stored = []
            for row in zip(*columns):
                cursor.execute(f"{insert} VALUES (%s, %s, %s, %s, %s, %s) {skip}", [run_id, *row])
                stored.extend(cursor.fetchall())
        fine = [(k, s, v) for k, s, v, c in stored if not c]
        if fine:
            new_keys, new_steps, new_values = (np.array(c) for c in zip(*fine))
            upsert_buckets(bucket_rows(run_id, new_keys.astype(np.int64), new_steps.astype(np.int64), new_values))
    names_of = {i: n for n, i in ids.items()}
    back = [v if not c else finite.value_of(c) for _, _, v, c in stored]  # the values sent, NaN and ±inf too
    return [names_of[k] for k, _, _, _ in stored], [s for _, s, _, _ in stored], back


def stored_mask(run_id: int, keys: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Which of the (key, step) pairs the run already has stored: one indexed range query."""
    stored = MetricPoint.objects.filter(
        run_id=run_id, key_id__in=np.unique(keys).tolist(), step__gte=int(steps.min()), step__lte=int(steps.max())
    ).values_list("key_id", "step")
    pairs = np.array(list(stored), dtype=np.int64).reshape(-1, 2)
    if not len(pairs):
        return np.zeros(len(keys), dtype=bool)
    return np.isin(keys << 32 | steps, pairs[:, 0] << 32 | pairs[:, 1])


def copy_payload(run_id: int, keys, steps, values, walls, kinds=None) -> bytes:
    kinds = finite.kinds(values) if kinds is None else kinds
    ok = kinds == finite.FINITE
    rows = np.empty(int(ok.sum()), dtype=COPY_ROW)
    rows["fields"] = 6
    rows["run_len"], rows["key_len"], rows["step_len"] = 8, 8, 4
    rows["value_len"], rows["wall_len"], rows["kind_len"] = 8, 8, 2
    rows["run"], rows["key"], rows["step"] = run_id, keys[ok], steps[ok]
    rows["value"], rows["wall"], rows["kind"] = values[ok], walls[ok], finite.FINITE
    nulls = np.empty(int((~ok).sum()), dtype=COPY_NULL_ROW)
    nulls["fields"] = 6
    nulls["run_len"], nulls["key_len"], nulls["step_len"] = 8, 8, 4
    nulls["value_len"], nulls["wall_len"], nulls["kind_len"] = -1, 8, 2
    nulls["run"], nulls["key"], nulls["step"] = run_id, keys[~ok], steps[~ok]
    nulls["wall"], nulls["kind"] = walls[~ok], kinds[~ok]
    return COPY_HEADER + rows.tobytes() + nulls.tobytes() + COPY_TRAILER


def copy_points(run_id: int, keys, steps, values, walls, kinds) -> None:
    table = MetricPoint._meta.db_table
    payload = copy_payload(run_id, keys, steps, values, walls, kinds)
    with connection.cursor() as cursor, connection.wrap_database_errors:  # psycopg errors as Django's
        raw = cursor.cursor  # psycopg 3's own cursor: Django's wrapper has no copy()
        with raw.copy(f"COPY {table} ({COPY_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(payload)


def totals(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each bucket's sum; ±inf where it passes the largest float (its mean is then not drawn)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.add.reduceat(values, starts)


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
        totals(values, starts),
        np.minimum.reduceat(values, starts),
        np.maximum.reduceat(values, starts),
    )
    return [(run_id, *row) for row in zip(*(c.tolist() for c in columns))]


FLOAT_MAX = sys.float_info.max


def overflow_safe_sum(a: str, b: str) -> str:
    """SQL for a + b that is ±Infinity where the sum of two finite floats passes the largest one (PostgreSQL would
    refuse the statement, and with it the points). Halves first: their sum cannot overflow."""
    half = f"({a} * 0.5 + {b} * 0.5)"
    return (f"CASE WHEN {half} > {FLOAT_MAX / 2!r} THEN 'Infinity'::float8 "
            f"WHEN {half} < {-FLOAT_MAX / 2!r} THEN '-Infinity'::float8 ELSE {a} + {b} END")  # fmt: skip


def upsert_buckets(rows: list[tuple]) -> None:
    table = MetricBucket._meta.db_table
    lesser, greater = ("LEAST", "GREATEST") if connection.vendor == "postgresql" else ("MIN", "MAX")
    total = f"{table}.total + excluded.total"  # SQLite's overflow is inf, as numpy's
    if connection.vendor == "postgresql":
        total = overflow_safe_sum(f"{table}.total", "excluded.total")
    columns = "run_id, key_id, bucket, first_step, last_step, count, total, low, high"
    merge = (
        f"first_step = {lesser}({table}.first_step, excluded.first_step), "
        f"last_step = {greater}({table}.last_step, excluded.last_step), "
        f"count = {table}.count + excluded.count, total = {total}, "
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
