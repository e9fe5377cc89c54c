"""A run survives its worker, end to end, on a PostgreSQL, a Redis and a storage root of this module's own.

`kill -9` of the Celery worker (its parent and its child, the whole process group) when a 150-step CPU run has
stored step 60, its message redelivered by the broker, then a new worker started: the redelivered message starts
nothing, the monitor re-queues the run, the new worker resumes it from its last checkpoint, and the run finishes
`succeeded` with 150 steps, every metric point, sample and group outcome stored exactly once, its two attempts
listed, and a metric stream that the platform's own Verify (a rerun of the same config, compared point by point)
finds identical to an undisturbed run's. And a run its user cancelled at step 30 and resumed through the API
goes on from its checkpoint and ends the same way.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
import redis

from tests.live.platform.test_outages import query
from tests.support.live import LOGS, ROOT, Stack, wait_until
from tests.support.platform_fixtures import SMALL_RUN
from tests.support.throwaway import Postgres, Redis

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
STEPS, KILL_AT = 150, 60
RUN = {
    **SMALL_RUN,
    "rollout": {"group_size": 2, "prompts_per_step": 2, "max_new_tokens": 4},
    "schedule": {"steps": STEPS, "save_final": False},  # a resume checkpoint every 10 steps: the tiny model's auto
    "eval": {"every": 100, "size": 8, "k": 2},  # the evaluation before step 1 is not reported again
}
MAKE_TOKEN = (
    "import django; django.setup(); from django.contrib.auth import get_user_model; "
    "from rolloutlab.accounts.models import ApiToken; "
    "u = get_user_model().objects.create_user('ops'); print(ApiToken.issue(u, 'resume')[1])"
)
FINAL = ("succeeded", "failed", "cancelled", "lost")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with Postgres() as pg, Redis() as redis:
        pg.migrate()
        env = {"DATABASE_URL": pg.url, "REDIS_URL": redis.url, "DJANGO_SETTINGS_MODULE": "rolloutlab.settings"}
        made = subprocess.run([sys.executable, "-c", MAKE_TOKEN], cwd=ROOT, env={**os.environ, **env},
                              check=True, capture_output=True, text=True)  # fmt: skip
        storage = tmp_path_factory.mktemp("storage")
        # a worker silent for 8 s is lost: the monitor re-queues the run soon after the kill
        env = {"HEARTBEAT_INTERVAL_S": "1", "HEARTBEAT_TIMEOUT_S": "8", "STORAGE_ROOT": str(storage)}
        stack = Stack(database_url=pg.url, redis_url=redis.url, name="resume-", env=env)
        stack.start()
        stack.pg, stack.token, stack.storage = pg, made.stdout.strip().splitlines()[-1], storage
        try:
            yield stack
        finally:
            stack.stop()


def state_and_step(stack, run_id: int) -> tuple[str, int]:
    return query(stack.pg, "SELECT state, step FROM runs_run WHERE id = %s", run_id)[0]


def kill_worker_group(stack) -> None:
    """kill -9 the worker's parent and its pool child together; neither is left."""
    group = os.getpgid(stack.worker.pid)
    members = subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True).stdout.split()
    assert len(members) >= 2, members  # the parent and the child that trains
    os.killpg(group, signal.SIGKILL)
    stack.worker.wait(timeout=10)
    wait_until(lambda: not subprocess.run(["pgrep", "-g", str(group)], capture_output=True).stdout, 10,
               what="every process of the worker to be gone")  # fmt: skip


def redeliver_unacknowledged(stack) -> list[str]:
    """Put the killed worker's unacknowledged messages back in their queue, as the broker does once their
    visibility timeout has passed (acks_late); returns their task ids."""
    client = redis.Redis.from_url(stack.redis_url)
    ids = []
    for tag, raw in client.hgetall("unacked").items():
        message, _exchange, queue = json.loads(raw)
        client.lpush(queue, json.dumps(message))
        client.hdel("unacked", tag)
        client.zrem("unacked_index", tag)
        ids.append(message["headers"]["id"])
    return ids


def stored(stack, run_id: int, sql: str) -> list[tuple]:
    return query(stack.pg, sql.format(run=int(run_id)))


POINTS = ("SELECT k.name, p.step, count(*) FROM metrics_metricpoint p JOIN metrics_metrickey k ON k.id = p.key_id "
          "WHERE p.run_id = {run} GROUP BY k.name, p.step ORDER BY k.name, p.step")  # fmt: skip
PER_STEP = "SELECT step, count(*) FROM {table} WHERE run_id = {{run}} GROUP BY step ORDER BY step"


def verified(stack, run_id: int, rerun: int) -> dict:
    """The run's audit once its verification rerun has ended and the verification holds its result (completed
    when the rerun's execution is over, a moment after its final state)."""
    wait_until(lambda: state_and_step(stack, rerun)[0] in FINAL, 300, interval=0.5, what="the verification rerun")

    def audit_with_result():
        audit = stack.api(stack.token, "GET", f"/api/runs/{run_id}/audit")[1]
        return audit if audit["verifications"][0]["result"] is not None else None

    return wait_until(audit_with_result, 60, interval=0.5, what="the verification's result")


def test_a_run_whose_worker_is_killed_at_step_60_resumes_on_a_new_worker_and_ends_as_if_undisturbed(stack):
    status, body = stack.api(stack.token, "POST", "/api/runs", {"config": RUN, "name": "survives"})
    assert status == 201, body
    run_id = body["id"]
    wait_until(lambda: state_and_step(stack, run_id)[1] >= KILL_AT, 300, interval=0.02, what=f"step {KILL_AT}")
    kill_worker_group(stack)
    state, killed_at = state_and_step(stack, run_id)
    assert state == "running" and KILL_AT <= killed_at < STEPS, (state, killed_at)
    # the broker hands the killed worker's message out again: it must not start a second execution
    redelivered = redeliver_unacknowledged(stack)
    assert len(redelivered) == 1, redelivered
    stack.start_worker()  # a new worker, as an orchestrator would start in the killed one's place

    ended = wait_until(lambda: state_and_step(stack, run_id)[0] in FINAL, 300, interval=0.5, what="the run to end")
    assert ended and state_and_step(stack, run_id) == ("succeeded", STEPS)
    checkpoints = stack.storage / "runs" / str(run_id) / "resume"  # a finished run is never resumed: no disk kept
    wait_until(lambda: not checkpoints.exists(), 10, what="the finished run's checkpoint to be removed")
    status, run = stack.api(stack.token, "GET", f"/api/runs/{run_id}")
    first, second = run["attempts"]
    assert first["outcome"] == "lost" and "no heartbeat from its worker" in first["reason"]
    assert second["outcome"] == "succeeded" and second["worker_host"]
    resumed = second["resumed_from_step"]  # the checkpoint at or before the step the worker died at
    # a checkpoint follows the storing of its step's points, so it is at most the last step stored
    assert resumed is not None and resumed % 10 == 0 and killed_at - 10 <= resumed <= killed_at, resumed
    moves = query(stack.pg, "SELECT from_state, to_state FROM runs_transition WHERE run_id = %s ORDER BY id", run_id)
    assert moves == [("", "queued"), ("queued", "running"), ("running", "queued"), ("queued", "running"),
                     ("running", "succeeded")]  # fmt: skip
    logged = [text for (text,) in query(stack.pg, "SELECT text FROM runs_logline WHERE run_id = %s", run_id)]
    assert f"attempt 2 resumes after step {resumed}, from its checkpoint" in logged
    worker_log = (LOGS / "resume-worker.log").read_text(errors="replace")
    assert re.search(rf"execute_run\[{redelivered[0]}\] succeeded in [\d.]+s: 'skipped'", worker_log)

    # the platform's own Verify: the same config rerun undisturbed, its metric stream compared point by point
    status, verification = stack.api(stack.token, "POST", f"/api/runs/{run_id}/verify")
    assert status == 201, verification
    rerun = verification["rerun"]
    audit = verified(stack, run_id, rerun)
    result = audit["verifications"][0]["result"]
    assert result["identical"] and result["compared"] > 10 * STEPS, result
    print(f"killed at step {killed_at}, resumed after step {resumed}; Verify: {audit['verifications'][0]['verdict']}")

    # every point once, and exactly the points, samples and group outcomes the undisturbed run stored
    points = stored(stack, run_id, POINTS)
    assert {count for _, _, count in points} == {1}
    assert {(name, step) for name, step, _ in points} == {
        (name, step) for name, step, _ in stored(stack, rerun, POINTS)
    }
    assert {step for _, step, _ in points} == set(range(STEPS + 1))  # step 0: the evaluation before training
    for table in ("runs_sample", "metrics_groupoutcome"):
        assert stored(stack, run_id, PER_STEP.format(table=table)) == stored(stack, rerun, PER_STEP.format(table=table))


def test_a_cancelled_run_resumed_by_its_user_goes_on_from_its_checkpoint_and_ends_as_if_undisturbed(stack):
    status, body = stack.api(stack.token, "POST", "/api/runs", {"config": RUN, "name": "cancelled, then resumed"})
    assert status == 201, body
    run_id = body["id"]
    # step 31 seen: the resume checkpoint after step 30 is written (step 30 itself is stored just before it, and a
    # cancel in between leaves the one after step 20: CI once met that race)
    wait_until(lambda: state_and_step(stack, run_id)[1] >= 31, 300, interval=0.05, what="step 31")
    assert stack.api(stack.token, "POST", f"/api/runs/{run_id}/cancel")[0] == 200
    wait_until(lambda: state_and_step(stack, run_id)[0] == "cancelled", 30, interval=0.2, what="the cancel")
    status, resumed = stack.api(stack.token, "POST", f"/api/runs/{run_id}/resume")
    assert status == 200 and resumed["state"] == "queued", resumed
    status, again = stack.api(stack.token, "POST", f"/api/runs/{run_id}/resume")
    assert status == 409 and again["error"] == "the run is queued; only a failed, cancelled or lost run can be resumed"

    wait_until(lambda: state_and_step(stack, run_id)[0] in FINAL, 300, interval=0.5, what="the run to end")
    assert state_and_step(stack, run_id) == ("succeeded", STEPS)
    first, second = stack.api(stack.token, "GET", f"/api/runs/{run_id}")[1]["attempts"]
    assert first["outcome"] == "cancelled" and second["outcome"] == "succeeded"
    assert second["resumed_from_step"] is not None and second["resumed_from_step"] >= 30
    status, verification = stack.api(stack.token, "POST", f"/api/runs/{run_id}/verify")
    assert status == 201, verification
    rerun = verification["rerun"]
    result = verified(stack, run_id, rerun)["verifications"][0]["result"]
    assert result["identical"], result
    assert {(n, s) for n, s, _ in stored(stack, run_id, POINTS)} == {(n, s) for n, s, _ in stored(stack, rerun, POINTS)}
