"""The compare page for 50 runs x 10 metrics x 10,000 steps: server time and payload.

Fills a fresh database with 50 runs (two methods x 25 seeds), each with 10
metrics and the two counters over 10,000 steps (6,000,000 points), then times
the compare page's data request (GET /api/compare, grouped by method, 10
metrics; the server's whole time: queries, aggregation, bootstrap, JSON) and
its HTML. The peer is what a tracker without server-side aggregation serves for
the same view: every raw point of the 500 series, read and JSON-encoded.
Targets: <= 500 ms server time, <= 2 MB of data.

    python bench/compare_page.py

Last line: {"bench": "compare_page", "ours": ms, "peer": ms, "unit": "ms", "ratio": ours/peer}
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np
from _platform import make_run, setup_django

RUNS, METRICS, STEPS, REPS = 50, 10, 10_000, 7
NAMES = [f"bench/metric_{i}" for i in range(METRICS)]


def fill() -> list[int]:
    from rolloutlab.metrics.ingest import write_columns
    from rolloutlab.runs.models import Run

    rng = np.random.default_rng(0)
    steps = np.arange(1, STEPS + 1)
    ids = []
    for i in range(RUNS):
        method = "grpo" if i % 2 else "mc-grpo"
        run = make_run(f"{method}-{i}", state="succeeded")
        Run.objects.filter(id=run.id).update(method=method, seed=i // 2, total_steps=STEPS,
                                             summary={name: float(rng.random()) for name in NAMES})  # fmt: skip
        names, values, at = [], [], []
        for name in NAMES:
            names += [name] * STEPS
            values.append(np.cumsum(rng.normal(0.001, 0.01, STEPS)))
            at.append(steps)
        names += ["counters/rollout_tokens"] * STEPS + ["counters/wall_s"] * STEPS
        values += [steps * 800.0, steps * 0.2]
        at += [steps, steps]
        all_steps = np.concatenate(at)
        write_columns(run.id, names, all_steps, np.concatenate(values), np.zeros(len(names)))
        ids.append(run.id)
    return ids


def timed_get(client, url: str) -> tuple[float, bytes]:
    times, body = [], b""
    for _ in range(REPS):
        started = time.perf_counter()
        response = client.get(url)
        body = response.content
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, body[:300]
    return statistics.median(times), body


def raw_payload(run_ids: list[int]) -> tuple[float, int]:
    """Every point of the selection, read and JSON-encoded: what serving it unaggregated costs."""
    from django.db import connection

    from rolloutlab.metrics.models import MetricKey, MetricPoint

    keys = list(MetricKey.objects.filter(name__in=NAMES).values_list("id", flat=True))
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT run_id, key_id, step, value FROM {MetricPoint._meta.db_table} "
            f"WHERE run_id = ANY(%s) AND key_id = ANY(%s) ORDER BY 1, 2, 3",
            [run_ids, keys],
        )
        body = json.dumps(cursor.fetchall()).encode()
    return (time.perf_counter() - started) * 1000, len(body)


def main() -> None:
    setup_django("rolloutlab_bench_compare")
    from django.db import connection
    from django.test import Client

    started = time.perf_counter()
    ids = fill()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"wrote {RUNS * (METRICS + 2) * STEPS:,} points in {time.perf_counter() - started:.0f} s")
    client = Client()
    from rolloutlab.runs.models import Run

    client.force_login(Run.objects.get(id=ids[0]).owner)
    query = f"runs={','.join(map(str, ids))}&metrics={','.join(NAMES)}&baseline=mc-grpo&target=0.5"
    data_ms, body = timed_get(client, f"/api/compare?{query}")
    page_ms, _ = timed_get(client, f"/compare/?{query}")
    seeds_ms, seeds_body = timed_get(client, f"/api/compare?{query}&seeds=1")
    peer_ms, peer_bytes = raw_payload(ids)
    payload = json.loads(body)
    assert len(payload["groups"]) == 2 and len(payload["charts"]) == METRICS
    print(f"compare data: {data_ms:.0f} ms, {len(body) / 1e6:.2f} MB; page HTML {page_ms:.0f} ms; "
          f"with individual seeds {seeds_ms:.0f} ms, {len(seeds_body) / 1e6:.2f} MB; "
          f"every raw point instead: {peer_ms:.0f} ms, {peer_bytes / 1e6:.1f} MB")  # fmt: skip
    print(
        json.dumps(
            {"bench": "compare_page", "ours": data_ms, "peer": peer_ms, "unit": "ms", "ratio": data_ms / peer_ms}
        )
    )
    if data_ms > 500 or len(body) > 2e6:
        sys.exit("over the targets: 500 ms, 2 MB")


if __name__ == "__main__":
    main()
