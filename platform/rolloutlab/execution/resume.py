"""Where a new attempt of a run starts, and the stored results of the steps it will report again.

    point, note = prepare(run_id, attempt, artifacts_dir)   # after lifecycle.claim
    Trainer(cfg, reporter, artifacts_dir=artifacts_dir).run(resume=point)

The first attempt starts from step 0. A later one (its worker was lost, or a user resumed the run) starts after
the run's latest checkpoint (workers.training.checkpoint), written by the trainer every schedule.checkpoint_every steps;
the metric points, samples and group outcomes stored for the steps after it are removed first, in one
transaction, so the steps reported again replace them and none is stored twice. With no checkpoint (none
written yet, or a trainer that writes none: the asynchronous one), the new attempt starts over and everything
the run stored is removed. A run on Ray resumes the same way (workers.training.distributed.run_on_ray).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from django.db import connection, transaction

from rolloutlab.metrics.ingest import bucket_rows, upsert_buckets
from rolloutlab.metrics.models import BUCKET_STEPS, GroupOutcome, MetricBucket, MetricKey, MetricPoint
from rolloutlab.realtime import notify
from rolloutlab.runs.models import Run, RunAttempt, Sample
from workers import metrics as metric
from workers.training.checkpoint import DIRECTORY, ResumePoint, latest_checkpoint

EVERYTHING = -1  # forget_after(run_id, EVERYTHING): no step is kept, not even the evaluation before step 1


def prepare(run_id: int, attempt: int, artifacts_dir: Path) -> tuple[ResumePoint | None, str]:
    """The checkpoint attempt `attempt` resumes from (None: from the start), with a line for the run's log saying
    which; what the run stored after it is removed."""
    if attempt == 1:
        # a folder left by a run of the same id in an earlier database (restored, or made anew) is not this run's
        shutil.rmtree(Path(artifacts_dir) / DIRECTORY, ignore_errors=True)
        point, note = None, ""  # and whatever a run stored before attempts were counted goes too (no-op if new)
    else:
        point, note = resume_point(run_id, attempt, artifacts_dir)
    forget_after(run_id, point.step if point else EVERYTHING)
    # an open run page drops what it drew after that step: the steps after it are drawn again as they come
    notify(run_id, {"kind": "rewind", "step": point.step if point else EVERYTHING})
    # 0: it started over (no checkpoint is of step 0); None stays "not known yet" while the attempt starts
    RunAttempt.objects.filter(run_id=run_id, number=attempt).update(resumed_from_step=point.step if point else 0)
    return point, note


def resume_point(run_id: int, attempt: int, artifacts_dir: Path) -> tuple[ResumePoint | None, str]:
    point = latest_checkpoint(artifacts_dir)
    if point is None:
        return None, f"attempt {attempt} starts over: the run has no checkpoint yet"
    stored = Run.objects.values_list("step", flat=True).get(id=run_id)
    if stored < point.step:
        # the trainer stores a step's points before it checkpoints the step (Trainer.write_resume_checkpoint); a
        # checkpoint ahead of them would leave the steps between with no points at all
        return None, f"attempt {attempt} starts over: its checkpoint (step {point.step}) is ahead of the stored " \
                     f"metrics (step {stored})"  # fmt: skip
    return point, f"attempt {attempt} resumes after step {point.step}, from its checkpoint"


def forget_after(run_id: int, step: int) -> None:
    """Remove what the run stored for the steps after `step` (EVERYTHING: all of it): metric points and their
    bucket aggregates, samples, group outcomes; its step, summary and training time become those of what is left.
    One transaction: a reader sees the run before or after, never a run with half its points."""
    with transaction.atomic():
        MetricPoint.objects.filter(run_id=run_id, step__gt=step).delete()
        first_bucket = (step + 1) // BUCKET_STEPS  # the bucket of the first step removed
        MetricBucket.objects.filter(run_id=run_id, bucket__gte=first_bucket).delete()
        rebuild_bucket(run_id, first_bucket)
        Sample.objects.filter(run_id=run_id, step__gt=step).delete()
        GroupOutcome.objects.filter(run_id=run_id, step__gt=step).delete()
        summary = latest_values(run_id)
        Run.objects.filter(id=run_id).update(
            step=max(step, 0), summary=summary, train_seconds=summary.get(metric.WALL_S) or 0.0
        )


def rebuild_bucket(run_id: int, bucket: int) -> None:
    """The aggregates of a bucket from the finite points left in it (the kept steps of a bucket cut in two)."""
    rows = MetricPoint.objects.filter(
        run_id=run_id, step__gte=bucket * BUCKET_STEPS, step__lt=(bucket + 1) * BUCKET_STEPS, kind=0
    ).values_list("key_id", "step", "value")
    points = np.array(list(rows), dtype=np.float64).reshape(-1, 3)
    if len(points):
        keys, steps = points[:, 0].astype(np.int64), points[:, 1].astype(np.int64)
        upsert_buckets(bucket_rows(run_id, keys, steps, points[:, 2]))


def latest_values(run_id: int) -> dict[str, float | None]:
    """Each metric's value at the last step the run stored it (None where it was not finite), as the reporter
    keeps Run.summary."""
    table = MetricPoint._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT p.key_id, p.value FROM {table} p JOIN (SELECT key_id, max(step) AS step FROM {table} "
            "WHERE run_id = %s GROUP BY key_id) last ON p.key_id = last.key_id AND p.step = last.step "
            "WHERE p.run_id = %s",
            [run_id, run_id],
        )
        values = dict(cursor.fetchall())
    names = dict(MetricKey.objects.filter(id__in=values).values_list("id", "name"))
    return {names[key]: value for key, value in sorted(values.items(), key=lambda kv: names[kv[0]])}
