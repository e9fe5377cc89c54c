"""The database is the source of truth for the queue: a queued run whose wake-up the broker lost is sent again.

First against the test Redis, on a queue no worker serves: what the broker holds is read, a lost message is sent
again and a held one is not. Then end to end on a PostgreSQL and a Redis of this module's own
(tests/support/throwaway.py): 10 runs wait behind one worker, the broker restarts with nothing kept, and all 10
finish, each once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.utils import timezone

from rolloutlab.celery import app
from rolloutlab.execution.dispatch import broker_task_ids, resend_lost, submit
from rolloutlab.runs.models import Run, State
from tests.conftest import project_of, small_config
from tests.live.platform.test_outages import query
from tests.support.live import ROOT, Stack, wait_until
from tests.support.platform_fixtures import SMALL_RUN
from tests.support.throwaway import Postgres, Redis


def queued_run(alice, queue: str) -> Run:
    old = timezone.now() - timezone.timedelta(minutes=5)
    run = Run.objects.create(project=project_of(alice), name="waits", owner=alice, config=small_config().model_dump(
        mode="json"), config_hash="0" * 64, state=State.QUEUED, queue=queue)  # fmt: skip
    Run.objects.filter(id=run.id).update(created_at=old)
    return run


@pytest.mark.django_db
def test_a_wake_up_the_broker_lost_is_sent_again_and_one_it_holds_is_not(alice, probe_queue):
    lost, held = queued_run(alice, probe_queue), queued_run(alice, probe_queue)
    submit(lost.id)
    submit(held.id)
    lost.refresh_from_db()
    held.refresh_from_db()
    assert {lost.celery_task_id, held.celery_task_id} <= broker_task_ids({probe_queue})
    with app.connection_for_write() as connection:  # the broker loses the first message (a restart, say)
        connection.default_channel.client.lrem(probe_queue, 0, next(
            raw for raw in connection.default_channel.client.lrange(probe_queue, 0, -1)
            if lost.celery_task_id.encode() in raw))  # fmt: skip
    assert resend_lost(older_than_s=0) == [lost.id]
    lost.refresh_from_db()
    assert lost.celery_task_id in broker_task_ids({probe_queue})
    assert resend_lost(older_than_s=0) == []  # both held now: nothing is sent twice


@pytest.mark.django_db
def test_a_run_that_has_not_waited_long_is_left_alone(alice, probe_queue):
    run = queued_run(alice, probe_queue)
    Run.objects.filter(id=run.id).update(created_at=timezone.now(), celery_task_id="never-sent")
    assert resend_lost(older_than_s=60) == []


# ------------------------------------------------------------------ end to end
RUNS = 10
MAKE_TOKEN = (
    "import django; django.setup(); from django.contrib.auth import get_user_model; "
    "from rolloutlab.accounts.models import ApiToken; "
    "u = get_user_model().objects.create_user('queue'); print(ApiToken.issue(u, 'queue')[1])"
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ten_waiting_runs_all_finish_once_after_the_broker_restarts_with_nothing_kept():
    with Postgres() as pg, Redis() as redis:
        pg.migrate()
        env = {"DATABASE_URL": pg.url, "REDIS_URL": redis.url, "DJANGO_SETTINGS_MODULE": "rolloutlab.settings"}
        made = subprocess.run([sys.executable, "-c", MAKE_TOKEN], cwd=ROOT, env={**os.environ, **env},
                              check=True, capture_output=True, text=True)  # fmt: skip
        token = made.stdout.strip().splitlines()[-1]
        stack = Stack(database_url=pg.url, redis_url=redis.url, name="queue-",
                      env={"QUEUE_RECONCILE_AFTER_S": "3", "HEARTBEAT_INTERVAL_S": "1"})  # fmt: skip
        stack.start()
        try:
            ids = []
            for i in range(RUNS):
                status, body = stack.api(token, "POST", "/api/runs", {"config": SMALL_RUN, "name": f"waits-{i}"})
                assert status == 201, body
                ids.append(body["id"])
            states = lambda: dict(query(pg, "SELECT id, state FROM runs_run"))  # noqa: E731
            wait_until(lambda: "running" in states().values(), 60, what="the first run to start")
            redis.stop()  # with no persistence: every waiting run's message is gone
            time.sleep(2)
            redis.start()
            wait_until(lambda: all(s in ("succeeded", "failed", "lost") for s in states().values()), 420,
                       interval=1, what="all ten runs to end")  # fmt: skip
            assert set(states().values()) == {"succeeded"}
            # each ran once: one queued -> running transition per run
            starts = dict(query(pg, "SELECT run_id, count(*) FROM runs_transition WHERE to_state = 'running' "
                                    "GROUP BY run_id"))  # fmt: skip
            assert starts == {run_id: 1 for run_id in ids}
        finally:
            stack.stop()
