"""What the audit does as a run lives: keep its records as they are reported, verify when it ends."""

from __future__ import annotations

from django.dispatch import receiver

from rolloutlab.audit.services import complete_verification, keep_record
from rolloutlab.execution.lifecycle import artifact_reported, run_ended


@receiver(artifact_reported, dispatch_uid="audit-keep-record")
def keep_reported_record(sender, run_id: int, path: str, kind: str, **kwargs) -> None:
    keep_record(run_id, path, kind)


@receiver(run_ended, dispatch_uid="audit-complete-verification")
def complete_ended_verification(sender, run_id: int, **kwargs) -> None:
    complete_verification(run_id)  # if this run was a verification rerun, compare it with its original now
