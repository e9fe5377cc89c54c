"""The platform reporter against a failing database: non-finite values, retried and idempotent writes.

Every failure here is a real one: a connection PostgreSQL itself terminated, a
server that is not listening, or a write whose commit went through while its
answer was lost (the one case a retry must not write twice).
"""

import math
from datetime import timedelta

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.utils import timezone

from rolloutlab.execution import lifecycle
from rolloutlab.execution.monitor import Watch
from rolloutlab.execution.reporter import PlatformReporter, Retrying
from rolloutlab.metrics.ingest import write_columns
from rolloutlab.metrics.models import MetricPoint
from rolloutlab.runs.models import LogLine, Run, State
from tests.conftest import project_of
from tests.support import live

pytestmark = pytest.mark.django_db(transaction=True)  # the reporter writes from its own thread


@pytest.fixture
def run():
    user = get_user_model().objects.create_user("erin")
    project = project_of(user)
    run = Run.objects.create(project=project, name="r", owner=user, config={}, config_hash="0" * 64, total_steps=6)
    lifecycle.transition(run.id, State.RUNNING)
    return run


def points(run) -> list[tuple]:
    """(step, key, value, kind), ordered by names: key ids depend on which test made a key first."""
    stored = MetricPoint.objects.filter(run=run).order_by("step", "key__name")
    return list(stored.values_list("step", "key__name", "value", "kind"))


def terminate_my_connection() -> None:
    """PostgreSQL ends this thread's session, as a restart would: the next query on it fails."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(live.test_database_url().replace("postgres://", "postgresql://"), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_nan_mid_run_stops_nothing_and_later_points_are_stored(run):
    reporter = PlatformReporter(run.id)
    reporter.metrics(1, {"policy/loss": 1.0})
    reporter.metrics(2, {"policy/loss": math.nan, "optim/grad_norm": math.inf})
    for step in (3, 4):
        reporter.metrics(step, {"policy/loss": float(step), "optim/grad_norm": -math.inf if step == 3 else 2.0})
    reporter.status("succeeded", "4 steps")
    reporter.close()
    run.refresh_from_db()
    assert run.state == "succeeded" and run.step == 4
    loss, norm = "policy/loss", "optim/grad_norm"
    assert points(run) == [(1, loss, 1.0, 0), (2, norm, None, 2), (2, loss, None, 1), (3, norm, None, 3),
                           (3, loss, 3.0, 0), (4, norm, 2.0, 0), (4, loss, 4.0, 0)]  # fmt: skip
    assert run.summary == {"policy/loss": 4.0, "optim/grad_norm": 2.0}


def test_a_summary_keeps_a_non_finite_last_value_as_null(run):
    reporter = PlatformReporter(run.id)
    reporter.metrics(1, {"policy/loss": math.nan})
    reporter.close()
    run.refresh_from_db()
    assert run.summary == {"policy/loss": None} and run.step == 1


def test_a_flush_on_a_terminated_connection_is_retried_and_logged_and_loses_nothing(run, settings):
    settings.METRIC_FLUSH_INTERVAL_MS = 60_000  # the test's thread flushes, on the connection it terminates
    reporter = PlatformReporter(run.id)
    reporter.metrics(1, {"reward/mean": 0.1})
    reporter.flush()
    terminate_my_connection()
    reporter.metrics(2, {"reward/mean": 0.2})
    reporter.flush()  # the first try meets the dead session; the retry opens a fresh one
    reporter.close()
    assert points(run) == [(1, "reward/mean", 0.1, 0), (2, "reward/mean", 0.2, 0)]
    note = LogLine.objects.get(run=run).text
    assert "metrics write up to step 2 retried 1 times" in note and "OperationalError" in note
    assert Run.objects.get(id=run.id).step == 2


def test_a_retry_after_a_commit_whose_answer_was_lost_writes_nothing_twice(run):
    names, steps, values, walls = ["a", "b", "a"], [1, 1, 2], [1.0, math.nan, 3.0], [0.0, 0.0, 0.0]

    def write(attempt: int) -> None:
        write_columns(run.id, names, steps, values, walls, skip_stored=attempt > 0)
        if attempt == 0:  # committed, then the connection dropped before the answer came back
            raise OperationalError("server closed the connection unexpectedly")

    retry = Retrying(sleep=lambda s: None)
    retry.call(write, "metrics write")  # without skip_stored the retry would violate the primary key
    assert len(points(run)) == 3
    (note,) = retry.take_notes()
    assert note.startswith("metrics write retried 1 times") and "server closed the connection" in note


def test_retries_back_off_up_to_the_cap_and_give_up_after_the_limit(settings):
    settings.REPORTER_RETRY_MAX_S, settings.REPORTER_RETRY_FOR_S = 2, 10
    now, sleeps = [0.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    def never(attempt):
        raise OperationalError("connection refused")

    with pytest.raises(OperationalError):
        Retrying(sleep=sleep, clock=lambda: now[0]).call(never, "metrics write")
    assert sleeps == [0.25, 0.5, 1.0, 2, 2, 2, 2, 2]  # 11.75 s of waiting: past the 10 s limit, it gives up


def test_the_monitor_declares_no_run_lost_right_after_a_round_it_could_not_complete(run, settings):
    # As after an outage, no beat got through. The live stack's monitor (another process on this
    # database, with its own HEARTBEAT_TIMEOUT_S of 15 s) must not take the run first, so this
    # process's timeout is 1 s and the last beat 2 s old: stale here, fresh there for 13 s more.
    settings.HEARTBEAT_TIMEOUT_S = 1
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(seconds=2))
    now = [1000.0]
    watch = Watch(clock=lambda: now[0])
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"  # nothing listens there: the round fails for real
    try:
        assert watch.round() == [] and watch.failed
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port
    assert watch.round() == []  # back, but the workers get HEARTBEAT_TIMEOUT_S to beat again
    assert Run.objects.get(id=run.id).state == "running"
    now[0] += settings.HEARTBEAT_TIMEOUT_S
    assert watch.round() == [run.id]


def test_the_monitor_resends_the_wake_up_of_a_queued_run_the_broker_never_got(run, settings):
    queued = Run.objects.create(project=run.project, name="unsent", owner=run.owner, config={}, config_hash="2" * 64,
                                queue="nobody-listens-here")  # fmt: skip
    Run.objects.filter(id=queued.id).update(created_at=timezone.now() - timedelta(minutes=5))
    fresh = Run.objects.create(project=run.project, name="just now", owner=run.owner, config={}, config_hash="3" * 64,
                               queue="nobody-listens-here")  # fmt: skip
    Watch().round()
    assert Run.objects.get(id=queued.id).celery_task_id  # sent this time
    assert not Run.objects.get(id=fresh.id).celery_task_id  # its launch may still be sending it
