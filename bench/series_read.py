"""Serving a 1,000,000-point series downsampled to at most 2,000 points, and keeping a one-point spike.

Writes one series of 1,000,000 steps (with a single spike) through the ingest
path, then times GET /api/runs/<id>/series?points=2000 through Django (query,
downsampling and JSON: the server's whole time for the request), against the
query one would write without the stored bucket aggregates: GROUP BY over the
raw points. The target is <= 100 ms, with the spike present in the answer.

    python bench/series_read.py

Last line: {"bench": "series_read", "ours": ms, "peer": ms, "unit": "ms", "ratio": ours/peer}
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time

from _platform import make_run, setup_django

POINTS, SERVED, SPIKE_AT, REPS = 1_000_000, 2000, 612_345, 15


def fill(run_id: int) -> None:
    from rolloutlab.metrics.ingest import write_points

    chunk = 100_000
    for start in range(0, POINTS, chunk):
        rows = [("policy/loss", s, math.sin(s / 5000) + 0.01 * (s % 7), 0.0) for s in range(start, start + chunk)]
        if start <= SPIKE_AT < start + chunk:
            rows[SPIKE_AT - start] = ("policy/loss", SPIKE_AT, 1000.0, 0.0)
        write_points(run_id, rows)


def time_api(client, run_id: int) -> tuple[float, dict]:
    url = f"/api/runs/{run_id}/series?keys=policy/loss&points={SERVED}"
    times, body = [], None
    for _ in range(REPS):
        started = time.perf_counter()
        response = client.get(url)
        body = json.loads(response.content)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return statistics.median(times), body["series"]["policy/loss"]


def time_naive_query(run_id: int) -> float:
    from django.db import connection

    from rolloutlab.metrics.models import MetricKey, MetricPoint

    key = MetricKey.objects.get(name="policy/loss").id
    sql = (
        f"SELECT min(step), avg(value), min(value), max(value) FROM {MetricPoint._meta.db_table} "
        "WHERE run_id = %s AND key_id = %s GROUP BY step / %s ORDER BY 1"
    )
    times = []
    with connection.cursor() as cursor:
        for _ in range(5):
            started = time.perf_counter()
            cursor.execute(sql, [run_id, key, math.ceil(POINTS / SERVED)])
            cursor.fetchall()
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    setup_django("rolloutlab_bench_series")
    from django.db import connection
    from django.test import Client

    run = make_run("series")
    started = time.perf_counter()
    fill(run.id)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh statistics, as autovacuum would give a long-lived table
    print(f"wrote {POINTS:,} points in {time.perf_counter() - started:.1f} s")
    client = Client()
    client.force_login(run.owner)
    ours, series = time_api(client, run.id)
    peer = time_naive_query(run.id)
    spike_kept = max(series["high"]) == 1000.0
    print(f"served {len(series['step'])} points in a median {ours:.1f} ms (HTTP through Django, JSON included); "
          f"spike kept: {spike_kept}; GROUP BY over the raw points: {peer:.1f} ms")  # fmt: skip
    print(json.dumps({"bench": "series_read", "ours": ours, "peer": peer, "unit": "ms", "ratio": ours / peer}))
    if len(series["step"]) > SERVED or not spike_kept:
        sys.exit("the series came back too long, or without its spike")


if __name__ == "__main__":
    main()
