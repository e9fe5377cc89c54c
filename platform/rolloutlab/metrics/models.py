"""Metric storage: one narrow table of points, and per-bucket aggregates for fast downsampled reads.

Points are written with COPY (metrics/ingest.py); a non-finite value is stored
as NULL with its kind (rolloutlab/finite.py), and the buckets aggregate only the
finite values. Every BUCKET_STEPS steps of a
series also get one MetricBucket row holding min, max, sum and count, kept up
to date in the same transaction, so a read of a million-point series
aggregates a few thousand bucket rows instead of a million points.
"""

from django.db import models

from rolloutlab.runs.models import Run

BUCKET_STEPS = 128


class MetricKey(models.Model):
    name = models.CharField(max_length=200, unique=True)

    def __str__(self):
        return self.name


# The composite primary keys are the only indexes these tables need (every read filters on
# run and key); db_index=False spares each written point the upkeep of two more.


class MetricPoint(models.Model):
    pk = models.CompositePrimaryKey("run_id", "key_id", "step")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    key = models.ForeignKey(MetricKey, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    step = models.IntegerField()
    value = models.FloatField(null=True, help_text="NULL when the reported value was not finite (see kind)")
    wall_time = models.FloatField(help_text="Seconds since the epoch when the point was reported")
    kind = models.SmallIntegerField(db_default=0, help_text="0 finite, 1 NaN, 2 +inf, 3 -inf (metrics/finite.py)")

    class Meta:
        # a partial index holds only the rare non-finite points: a chart finds them without
        # scanning its series, and a finite point's insert skips it
        indexes = [models.Index(fields=["run", "key", "step"], condition=models.Q(kind__gt=0), name="metric_nonfinite")]


class MetricBucket(models.Model):
    pk = models.CompositePrimaryKey("run_id", "key_id", "bucket")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    key = models.ForeignKey(MetricKey, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    bucket = models.IntegerField(help_text="step // BUCKET_STEPS")
    first_step = models.IntegerField()
    last_step = models.IntegerField()
    count = models.IntegerField()
    total = models.FloatField()
    low = models.FloatField()
    high = models.FloatField()


class ChartChoice(models.Model):
    """The metrics a user last chose to chart on the run pages of a project: every run of it opens with them."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="chart_choices")
    project = models.ForeignKey("runs.Project", on_delete=models.CASCADE, related_name="chart_choices")
    keys = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="one_chart_choice_per_user_project")]


class GroupOutcome(models.Model):
    """One group a run sampled at a step, kept or dropped: the rows behind the run page's rollout views (per-prompt
    pass rates over training, the completion-length distribution per step)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="group_outcomes")
    step = models.IntegerField()
    prompt = models.TextField()
    answer = models.TextField(blank=True, default="")
    size = models.IntegerField()
    correct = models.IntegerField()
    reward_min = models.FloatField()
    reward_max = models.FloatField()
    lengths = models.JSONField(default=list)  # each sample's completion length, in tokens
    kept = models.BooleanField(default=True)  # False: the filter dropped the group

    class Meta:
        indexes = [models.Index(fields=["run", "step"])]
