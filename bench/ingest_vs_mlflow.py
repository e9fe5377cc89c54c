"""Metric ingest into PostgreSQL: the platform Reporter against MLflow's MlflowClient.log_batch.

Both write the same 100,000 points (20 keys x 5,000 steps, values from a seeded
RNG) into the same PostgreSQL server, each into a fresh database of its own and
one run. Ours is PlatformReporter.metrics() once per step, timed until close()
returns (every point committed); MLflow's is log_batch with 1,000 metrics a call
against its SQLAlchemy tracking store (postgresql+psycopg), its schema, experiment
and run created before the timer. The figure is points per second; the target is
ours >= 20x MLflow's.

    python bench/ingest_vs_mlflow.py

Last line: {"bench": "ingest_vs_mlflow", "ours": points/s, "peer": points/s, "unit": "points/s", "ratio": ours/peer}
"""

from __future__ import annotations

import json
import logging
import sys
import time

import numpy as np
from _platform import fresh_database, make_run, setup_django

KEYS, STEPS, BATCH, TARGET = 20, 5000, 1000, 20.0
NAMES = [f"key/{k}" for k in range(KEYS)]


def make_values() -> np.ndarray:
    """values[step, k]: the value of key k at that step, the same for both sides."""
    return np.random.default_rng(0).standard_normal((STEPS, KEYS))


def time_ours(values: np.ndarray) -> float:
    """Seconds for the Reporter to take every step and commit it; checks the points landed."""
    from channels.layers import get_channel_layer

    from rolloutlab.execution.reporter import PlatformReporter
    from rolloutlab.metrics.models import MetricPoint

    get_channel_layer()  # its backend is imported on first use: a once-a-process cost, like MLflow's set-up
    run = make_run("ingest")
    steps = [{name: float(v) for name, v in zip(NAMES, row)} for row in values]
    reporter = PlatformReporter(run.id)
    started = time.perf_counter()
    for step, metrics in enumerate(steps):
        reporter.metrics(step, metrics)
    reporter.close()
    seconds = time.perf_counter() - started
    written = MetricPoint.objects.filter(run=run).count()
    if written != values.size:
        sys.exit(f"ours: {written} points in the database, expected {values.size}")
    return seconds


def time_mlflow(values: np.ndarray) -> float:
    """Seconds for MLflow's log_batch to write every point, BATCH metrics a call; checks the points landed."""
    import psycopg
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)  # its schema creation talks at INFO
    database = fresh_database("mlflow_bench")
    client = MlflowClient(tracking_uri=database.replace("postgres://", "postgresql+psycopg://"))
    run_id = client.create_run(client.create_experiment("bench")).info.run_id
    stamp = int(time.time() * 1000)
    metrics = [Metric(name, float(v), stamp, step) for step, row in enumerate(values) for name, v in zip(NAMES, row)]
    batches = [metrics[i : i + BATCH] for i in range(0, len(metrics), BATCH)]
    started = time.perf_counter()
    for batch in batches:
        client.log_batch(run_id, metrics=batch)
    seconds = time.perf_counter() - started
    with psycopg.connect(database) as conn:
        written = conn.execute("SELECT count(*) FROM metrics WHERE run_uuid = %s", [run_id]).fetchone()[0]
    if written != values.size:
        sys.exit(f"MLflow: {written} points in the database, expected {values.size}")
    return seconds


def main() -> None:
    setup_django("rolloutlab_bench")
    values = make_values()
    ours = values.size / time_ours(values)
    peer = values.size / time_mlflow(values)
    ratio = ours / peer
    print(
        f"{values.size:,} points ({KEYS} keys x {STEPS} steps) into PostgreSQL: ours (PlatformReporter) {ours:,.0f} "
        f"points/s, MLflow log_batch ({BATCH} a call) {peer:,.0f} points/s; {ratio:.1f}x (target {TARGET:.0f}x)"
    )
    print(json.dumps({"bench": "ingest_vs_mlflow", "ours": ours, "peer": peer, "unit": "points/s", "ratio": ratio}))


if __name__ == "__main__":
    main()
