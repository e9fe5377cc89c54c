"""Every run is bounded by its wall time: Celery time limits on its task, a deadline in the embedded thread.

The Celery case is live: a real worker process (prefork, one task per child, as compose.yaml
runs it) gets a run with a one-second wall time and ends it failed, with the message, before
the hard limit would have killed it.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
import redis

from rolloutlab.execution import dispatch, services
from rolloutlab.execution.executor import execute
from rolloutlab.runs.models import LogLine, Run, Transition
from tests.conftest import project_of
from tests.support.live import wait_until
from tests.support.platform_fixtures import SMALL_RUN

pytestmark = pytest.mark.timeout(600)

# far more steps than fit in a second: only the limit can end it
LONG_RUN = {**SMALL_RUN, "schedule": {"steps": 50_000, "save_final": False}, "eval": {"every": 0, "size": 16}}


def long_run(wall_time_s: int | None) -> dict:
    return {**LONG_RUN, "resources": {"device": "cpu", **({"wall_time_s": wall_time_s} if wall_time_s else {})}}


def queued_message(broker_url: str, queue: str) -> dict:
    """The one message on a queue, as the Redis transport stores it (nobody consumes this queue)."""
    raw = redis.Redis.from_url(broker_url).lrange(queue, 0, -1)
    assert len(raw) == 1, raw
    return json.loads(raw[0])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("wall_time_s, soft, hard", [(120, 150, 180), (None, 86_400 + 30, 86_400 + 60)])
def test_the_task_is_sent_with_soft_and_hard_limits_from_the_runs_wall_time(alice, settings, wall_time_s, soft, hard):
    settings.RUN_TIME_LIMIT_GRACE_S = 30
    queue = f"probe-{time.time_ns() % 10**9}"  # no worker listens here: the message stays to be read
    run = Run.objects.create(project=project_of(alice), name="r", owner=alice, config=long_run(wall_time_s),
                             config_hash="0" * 64, queue=queue)  # fmt: skip
    try:
        dispatch.submit(run.id)
        message = queued_message(settings.CELERY_BROKER_URL, queue)
    finally:
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(queue)
    assert message["headers"]["task"] == "runs.execute_run"
    assert message["headers"]["timelimit"] == [hard, soft]  # Celery's order: (hard, soft)
    assert json.loads(base64.b64decode(message["body"]))[0] == [run.id]


@pytest.mark.django_db(transaction=True)
def test_the_wall_time_is_at_most_the_deployments_ceiling(alice, settings):
    settings.RUN_LIMITS = {**settings.RUN_LIMITS, "wall_time_s": 100}
    from rolloutlab.execution.limits import wall_time_s

    assert (wall_time_s(long_run(None)), wall_time_s(long_run(50)), wall_time_s(long_run(500))) == (100, 50, 100)


def test_a_celery_run_over_its_wall_time_ends_failed_with_the_time_limit_message(alice, stack, settings):
    settings.RUN_TIME_LIMIT_GRACE_S = 3  # soft limit at 1 + 3 s, hard at 1 + 6 s
    run = services.launch_run(alice, long_run(1), name="too long")  # dispatched by this process, on commit
    ended = wait_until(lambda: Run.objects.filter(id=run.id, state__in=["failed", "lost", "succeeded"]).first(),
                       seconds=240, what="the run to end")  # fmt: skip
    assert ended.state == "failed", ended.detail
    assert ended.detail.startswith("time limit: the run went over its wall time of 1 s")
    assert LogLine.objects.filter(run=ended, text__startswith="time limit:").exists()
    assert [(t.from_state, t.to_state) for t in Transition.objects.filter(run=ended)][-1] == ("running", "failed")
    took = (ended.finished_at - ended.started_at).total_seconds()
    # after the wall time, and before the hard limit (which would have killed the child, not failed the run)
    assert 1 <= took < 1 + 2 * 3, took
    print(f"the time limit ended the run {took:.2f} s after it started")
    assert stack.worker.poll() is None  # the worker itself lives on, ready for the next run


@pytest.mark.django_db(transaction=True)
def test_the_embedded_executor_stops_a_run_at_its_wall_time(alice, monkeypatch, settings, tmp_path):
    settings.STORAGE_ROOT = tmp_path / "storage"
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    run = services.launch_run(alice, long_run(2), name="too long here")
    started = time.monotonic()
    assert execute(run.id, wall_time_s=2) == "failed"
    took = time.monotonic() - started
    run.refresh_from_db()
    assert run.detail.startswith("time limit: the run went over its wall time of 2 s")
    assert run.step > 0 or took >= 2  # it trained (or warm-started) until the deadline, not less
    assert 2 <= took < 60, took


def test_a_time_limit_hidden_by_the_error_of_an_interrupted_query_still_reads_as_the_time_limit():
    """The soft limit can strike mid-query; the cleanup then raises its own error, with the limit as context."""
    from celery.exceptions import SoftTimeLimitExceeded
    from django.db import ProgrammingError

    from rolloutlab.execution.executor import over_time

    try:
        try:
            raise SoftTimeLimitExceeded()
        except SoftTimeLimitExceeded:
            raise ProgrammingError("can't change 'autocommit' now") from None
    except ProgrammingError as masked:
        assert over_time(masked)
    assert not over_time(ProgrammingError("an ordinary database error"))
