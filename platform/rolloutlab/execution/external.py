"""External runs: a script's own training loop (rolloutlab_client.client, the TRL callback) reports into a run.

The run is created running; every report is its heartbeat (rolloutlab.execution.lifecycle marks it
lost after EXTERNAL_RUN_TIMEOUT_S of silence, and running again when reports come back).
Whatever a client sends twice is stored once: points by (run, name, step), samples and the run
itself by the client's key. Points are announced on the run's group like a worker's.
"""

from __future__ import annotations

import hashlib
import json
import time

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from rolloutlab.accounts import activity
from rolloutlab.execution.lifecycle import announce_points, run_ended, transition
from rolloutlab.execution.limits import check_active_runs
from rolloutlab.inputs import UserInputError
from rolloutlab.metrics.ingest import write_new_columns
from rolloutlab.metrics.models import MetricKey, MetricPoint
from rolloutlab.realtime import publish_points
from rolloutlab.runs.access import project_for_launch
from rolloutlab.runs.models import Kind, Run, Sample, State, Transition
from rolloutlab_client.wire import ExternalRunIn, FinishIn, Point, SampleIn
from workers import metrics as metric

FINISHED = {"finished": State.SUCCEEDED, "failed": State.FAILED, "cancelled": State.CANCELLED}


def start_external_run(user, given: ExternalRunIn) -> tuple[Run, bool]:
    """(the run, whether it is new): a key the user already started a run with finds that run."""
    if given.key:
        existing = Run.objects.filter(owner=user, client_key=given.key).first()
        if existing is not None:
            return existing, False
    project = project_for_launch(user, given.project)  # 403 for a viewer, as for a launch
    check_active_runs(user)  # a script's run counts against the user's cap as a launched one does (429)
    canonical = json.dumps(given.config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    now = timezone.now()
    try:
        with transaction.atomic():
            run = Run.objects.create(
                project=project, name=given.name or f"external-{now:%Y%m%d-%H%M%S}", owner=user,
                kind=Kind.EXTERNAL, client_key=given.key, queue="", config=given.config,
                config_hash=hashlib.sha256(canonical.encode()).hexdigest(), total_steps=given.total_steps,
                state=State.RUNNING, started_at=now, heartbeat_at=now,
            )  # fmt: skip
            Transition.objects.create(
                run=run, from_state="", to_state=State.RUNNING, cause=f"started by {user}'s script"
            )
            activity.note(user, "launched", project, activity.run_subject(run))
    except IntegrityError:  # the same key, sent again while the first try was still being stored
        return Run.objects.get(owner=user, client_key=given.key), False
    return run, True


def receiving(run: Run) -> Run:
    """The run, locked for this report: running (again, if it was lost), else a 409.

    Call inside a transaction; the lock orders concurrent reports of one run, so each one's
    count of what it stored, and the summary it leaves, are exact.
    """
    locked = Run.objects.select_for_update().get(id=run.id)
    if locked.kind != Kind.EXTERNAL:
        raise UserInputError(f"run #{run.id} is run by a worker; only external runs take reports", status=409)
    if locked.state == State.LOST:
        transition(run.id, State.RUNNING, "its client reports again")
        locked.refresh_from_db()
    if locked.state != State.RUNNING:
        raise UserInputError(f"the run is {locked.state}; it takes no more reports", status=409)
    return locked


def record_points(run: Run, points: list[Point]) -> int:
    """Store the points not stored yet, bring the run's step and summary up to date, announce them."""
    now = time.time()
    with transaction.atomic():
        locked = receiving(run)
        names, steps, values = write_new_columns(
            run.id, [p.name for p in points], [p.step for p in points], [p.value for p in points],
            [p.wall_time if p.wall_time is not None else now for p in points],
        )  # fmt: skip
        locked.heartbeat_at = timezone.now()
        if names:
            locked.step = max(locked.step, *steps)
            locked.summary = {**locked.summary, **latest_values(run.id, set(names))}
            locked.train_seconds = locked.summary.get(metric.WALL_S, locked.train_seconds)
        locked.save(update_fields=["heartbeat_at", "step", "summary", "train_seconds"])
    if names:  # committed: now they may be announced
        publish_points(run.id, names, steps, values, {"step": locked.step, "train_seconds": locked.train_seconds})
        announce_points(run.id, names, steps, values)
    return len(names)


def latest_values(run_id: int, names: set[str]) -> dict[str, float]:
    """Each metric's value at its highest step: a late retry of an old batch must not roll the summary back."""
    latest = MetricPoint.objects.filter(run_id=run_id, key_id=OuterRef("id")).order_by("-step").values("value")[:1]
    return dict(MetricKey.objects.filter(name__in=names).annotate(v=Subquery(latest)).values_list("name", "v"))


def record_samples(run: Run, samples: list[SampleIn]) -> int:
    with transaction.atomic():
        locked = receiving(run)
        before = Sample.objects.filter(run_id=run.id).count()
        Sample.objects.bulk_create(
            [Sample(run_id=run.id, step=s.step, client_key=s.key, data=s.model_dump(exclude={"key"})) for s in samples],
            ignore_conflicts=True,  # a key already stored: an earlier try of this batch got through
        )
        locked.heartbeat_at = timezone.now()
        locked.save(update_fields=["heartbeat_at"])
        return Sample.objects.filter(run_id=run.id).count() - before


def finish_external_run(run: Run, given: FinishIn) -> Run:
    """The run's final state; finishing it again the same way (a retry) is not an error."""
    if run.kind != Kind.EXTERNAL:
        raise UserInputError(f"run #{run.id} is run by a worker; cancel it instead", status=409)
    wanted = FINISHED[given.status]
    cause = given.detail or f"its client reported {given.status}"
    if transition(run.id, wanted, cause):  # from running, or from lost: the client came back to finish
        if wanted == State.SUCCEEDED and run.total_steps:  # finished is all of it, whether its steps count from 0 or 1
            Run.objects.filter(id=run.id, step__lt=run.total_steps).update(step=run.total_steps)
        run_ended.send(sender=Run, run_id=run.id)
    run.refresh_from_db()
    if run.state != wanted:
        raise UserInputError(f"the run is already {run.state}", status=409)
    return run
