"""What a user can do to a run's records: delete finished runs (rows, then files); whether a run was imported.

Launching, cancelling, resuming and rerunning go through the execution side
(rolloutlab.execution.services). The metric points a run stored are the metrics
app's: it deletes them on `deleting_runs`, in the same transaction, so a delete
stays all or nothing without the runs app knowing the metrics tables.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal

from rolloutlab.accounts import activity
from rolloutlab.inputs import UserInputError
from rolloutlab.runs.models import FINAL_STATES, Run, State

# sent with run_ids inside the transaction that deletes those runs: what other apps hold of them goes too
deleting_runs = Signal()


def imported(run: Run) -> bool:
    """Whether the run came from a bundle: it never went through this deployment's queue."""
    return not run.transitions.filter(to_state=State.QUEUED).exists()


def delete_run(run: Run, user) -> None:
    """Delete a finished run and everything it recorded; a live one must be cancelled first."""
    delete_runs([run], user)


def delete_runs(runs: list[Run], user) -> None:
    """Delete finished runs, all or none: their rows in one transaction, their files once it has committed."""
    live = [run for run in runs if run.state not in FINAL_STATES]
    if live:
        states = ", ".join(f"#{run.id} is {run.state}" for run in live)
        raise UserInputError(f"cancel a live run before deleting it ({states}): nothing was deleted", status=409)
    ids = [run.id for run in runs]
    subjects = [(run.project, activity.run_subject(run)) for run in runs]
    with transaction.atomic():
        deleting_runs.send(sender=Run, run_ids=ids)
        Run.objects.filter(id__in=ids).delete()
        for project, subject in subjects:
            activity.note(user, "deleted", project, subject)
        # a rolled-back delete keeps its files: they go only once the rows are gone for good
        transaction.on_commit(lambda: remove_run_files(ids))


def remove_run_files(run_ids: list[int]) -> None:
    """The runs' artifact folders (checkpoints, logs) under STORAGE_ROOT; a folder already gone is fine."""
    for run_id in run_ids:
        shutil.rmtree(run_files(run_id), ignore_errors=True)


def run_files(run_id: int) -> Path:
    return Path(settings.STORAGE_ROOT) / "runs" / str(run_id)  # where rolloutlab.execution.executor trains it
