"""The run state machine, the platform reporter, and lost-run detection."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from rolloutlab.execution import lifecycle, services
from rolloutlab.execution.reporter import PlatformReporter
from rolloutlab.metrics.models import MetricPoint
from rolloutlab.runs.models import Artifact, LogLine, Run, Sample, State, Transition
from tests.conftest import project_of

pytestmark = pytest.mark.django_db(transaction=True)  # the reporter writes from its own thread


@pytest.fixture
def run():
    user = get_user_model().objects.create_user("carol")
    project = project_of(user)
    return Run.objects.create(project=project, name="r", owner=user, config={}, config_hash="0" * 64, total_steps=10)


def states(run):
    return [(t.from_state, t.to_state) for t in Transition.objects.filter(run=run)]


def test_allowed_transitions_are_recorded_with_time_and_cause(run):
    assert lifecycle.transition(run.id, State.RUNNING, "started on host-a")
    assert lifecycle.transition(run.id, State.SUCCEEDED, "10 steps")
    run.refresh_from_db()
    assert run.state == "succeeded" and run.started_at and run.finished_at >= run.started_at
    assert states(run) == [("queued", "running"), ("running", "succeeded")]
    assert Transition.objects.filter(run=run).last().cause == "10 steps"


def test_a_final_state_is_final(run):
    lifecycle.transition(run.id, State.RUNNING)
    lifecycle.transition(run.id, State.LOST, "no heartbeat")
    assert not lifecycle.transition(run.id, State.SUCCEEDED, "late")
    assert not lifecycle.transition(run.id, State.RUNNING, "redelivered")
    run.refresh_from_db()
    assert run.state == "lost"


def test_a_run_without_heartbeat_and_attempts_left_becomes_lost_and_a_beating_one_does_not(run, settings):
    settings.RUN_MAX_ATTEMPTS = 1  # re-queued runs: tests/live/platform/test_run_attempts.py
    # One transaction: the live stack's lost-run monitor, another process on this database,
    # must not see the stale run before this test's own check takes it.
    with transaction.atomic():
        lifecycle.transition(
            run.id, State.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=settings.HEARTBEAT_TIMEOUT_S + 1)
        )
        other = Run.objects.create(project=run.project, name="alive", owner=run.owner, config={}, config_hash="1" * 64)
        lifecycle.transition(other.id, State.RUNNING, heartbeat_at=timezone.now())
        assert lifecycle.mark_lost_runs() == [run.id]
    run.refresh_from_db(), other.refresh_from_db()
    assert run.state == "lost" and "no heartbeat" in run.detail and other.state == "running"


def test_the_reporter_writes_everything_the_trainer_reports(run, tmp_path):
    lifecycle.transition(run.id, State.RUNNING)
    reporter = PlatformReporter(run.id)
    for step in range(1, 4):
        reporter.metrics(step, {"reward/mean": step / 10, "counters/wall_s": float(step)})
    reporter.samples(3, [{"prompt": "1+1=", "completion": "2"}])
    reporter.log("hello")
    (tmp_path / "weights.bin").write_bytes(b"abc")
    reporter.artifact(str(tmp_path / "weights.bin"), "checkpoint")
    reporter.status("succeeded", "3 steps")
    reporter.close()
    run.refresh_from_db()
    assert run.state == "succeeded" and run.step == 3 and run.train_seconds == 3.0
    assert run.summary == {"reward/mean": 0.3, "counters/wall_s": 3.0}
    assert MetricPoint.objects.filter(run=run).count() == 6
    assert Sample.objects.get(run=run).data["completion"] == "2"
    assert LogLine.objects.get(run=run).text == "hello"
    assert Artifact.objects.get(run=run).sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_should_stop_follows_the_cancel_request(run):
    lifecycle.transition(run.id, State.RUNNING)
    reporter = PlatformReporter(run.id)
    assert not reporter.should_stop()
    assert services.request_cancel(run, run.owner)
    reporter._stop_checked_at = 0  # skip the half-second cache
    assert reporter.should_stop()
    reporter.close()
