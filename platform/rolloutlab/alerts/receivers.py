"""What the alerts do as a run lives: check the project's rules when it ends and as its points are stored."""

from __future__ import annotations

from django.dispatch import receiver

from rolloutlab.alerts.services import points_alerts, run_ended_alerts
from rolloutlab.execution.lifecycle import points_written, run_ended


@receiver(run_ended, dispatch_uid="alerts-run-ended")
def alert_on_end(sender, run_id: int, **kwargs) -> None:
    run_ended_alerts(run_id)


@receiver(points_written, dispatch_uid="alerts-points-written")
def alert_on_points(sender, run_id: int, names, steps, values, **kwargs) -> None:
    points_alerts(run_id, names, steps, values)
