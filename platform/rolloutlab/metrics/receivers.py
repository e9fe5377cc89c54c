"""What the metrics app does when runs are deleted: their points and buckets go in the same transaction."""

from __future__ import annotations

from django.dispatch import receiver

from rolloutlab.metrics.models import MetricBucket, MetricPoint
from rolloutlab.runs.models import Run
from rolloutlab.runs.services import deleting_runs


@receiver(deleting_runs, sender=Run, dispatch_uid="metrics-delete-points")
def delete_points(sender, run_ids: list[int], **kwargs) -> None:
    # the points are many and have no foreign key to cascade along: one statement each
    MetricPoint.objects.filter(run_id__in=run_ids).delete()
    MetricBucket.objects.filter(run_id__in=run_ids).delete()
