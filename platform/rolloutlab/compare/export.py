"""Export the selected series at full resolution: CSV (streamed) or parquet.

Columns: run, run_name, group, metric, step, value, rollout_tokens, wall_s — the
counters at the same step, so any x-axis can be rebuilt from the file alone.
"""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.parquet as pq
from django.db import connection

from rolloutlab.compare.permalink import View
from rolloutlab.compare.service import group_runs
from rolloutlab.metrics.models import MetricKey, MetricPoint
from rolloutlab.runs.models import Run
from workers import metrics as metric

COLUMNS = ["run", "run_name", "group", "metric", "step", "value", "rollout_tokens", "wall_s"]


def rows(view: View, runs: list[Run]):
    """Every point of the selected metrics, with the counters of its step, ordered by run, metric, step.

    `runs` are select_runs's, chosen before a streamed response starts, so a run the user may not
    see is a 404 and never an error in the middle of a download."""
    label = {r.id: g for g, members in group_runs(runs, view.group).items() for r in members}
    names = {r.id: r.name for r in runs}
    keys = dict(MetricKey.objects.filter(name__in=view.metrics).values_list("id", "name"))
    counters = dict(MetricKey.objects.filter(name__in=[metric.ROLLOUT_TOKENS, metric.WALL_S])
                    .values_list("name", "id"))  # fmt: skip
    if not keys:
        return
    table = MetricPoint._meta.db_table
    run_list, key_list = ", ".join(["%s"] * len(runs)), ", ".join(["%s"] * len(keys))
    sql = (
        f"SELECT p.run_id, p.key_id, p.step, p.value, t.value, s.value FROM {table} p "
        f"LEFT JOIN {table} t ON t.run_id = p.run_id AND t.step = p.step AND t.key_id = %s "
        f"LEFT JOIN {table} s ON s.run_id = p.run_id AND s.step = p.step AND s.key_id = %s "
        f"WHERE p.run_id IN ({run_list}) AND p.key_id IN ({key_list}) ORDER BY p.run_id, p.key_id, p.step"
    )
    params = [counters.get(metric.ROLLOUT_TOKENS, -1), counters.get(metric.WALL_S, -1),
              *[r.id for r in runs], *keys]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(10_000):
            for run_id, key_id, step, value, tokens, seconds in batch:
                yield [run_id, names[run_id], label[run_id], keys[key_id], step, value, tokens, seconds]


class _Echo:
    def write(self, text):
        return text


def csv_lines(view: View, runs: list[Run]):
    writer = csv.writer(_Echo())
    yield writer.writerow(COLUMNS)
    for row in rows(view, runs):
        yield writer.writerow(row)


def parquet_bytes(view: View, runs: list[Run]) -> bytes:
    columns = list(zip(*rows(view, runs))) or [[] for _ in COLUMNS]
    types = [pa.int64(), pa.string(), pa.string(), pa.string(), pa.int64(), pa.float64(), pa.float64(), pa.float64()]
    table = pa.table({name: pa.array(list(col), type=t) for name, col, t in zip(COLUMNS, columns, types)})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()
