"""End to end on Ray: Chromium, daphne, a Celery worker on the `ray` queue and a real local Ray cluster.

The module starts the cluster as an operator would (`ray start --head`, token authentication on,
3 CPUs: a learner of 2 threads and two rollout actors of half a CPU each) and a worker that joins
it through RAY_ADDRESS. It does not know the worker's code: what it sees is the platform's.

1. A run launched from the browser with executor: ray runs on the cluster (its rollout actors
   report where they are), its page draws live points while it runs, and Cancel stops it within 5 s.
2. kill -9 of one of its rollout actors fails the run within 60 s, with the actor named as the cause.
3. kill -9 of the worker driving it leaves the run lost, as a local run's, and frees the cluster.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rolloutlab.execution import services
from rolloutlab.runs.models import LogLine, Run, Transition
from tests.live.platform.test_live_runs import log_in, page_state
from tests.support.live import LOGS, Stack, free_port, wait_until
from tests.support.platform_fixtures import SMALL_RUN, browser_page, fill_knob, open_section

pytestmark = [pytest.mark.timeout(600), pytest.mark.both_cores]

RAY = str(Path(sys.executable).parent / "ray")


@pytest.fixture(scope="module")
def ray_cluster():
    """A head node of 3 CPUs in its own process group; what a worker needs to join it."""
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    LOGS.mkdir(parents=True, exist_ok=True)
    command = [RAY, "start", "--head", f"--port={port}", "--num-cpus=3", "--num-gpus=0", "--include-dashboard=false",
               "--disable-usage-stats", "--block"]  # fmt: skip
    head = subprocess.Popen(command, env=env, stdout=open(LOGS / "ray-head.log", "ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    joining = {"RAY_ADDRESS": f"127.0.0.1:{port}", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": env["RAY_AUTH_TOKEN"]}
    wait_until(lambda: head.poll() is not None or ray_status(joining) == 0, 120, interval=1, what="the Ray head")
    assert head.poll() is None, f"ray start --head exited; see {LOGS / 'ray-head.log'}"
    yield joining
    os.killpg(head.pid, signal.SIGTERM)  # --block stops the node's processes on SIGTERM
    try:
        head.wait(timeout=5)
    except subprocess.TimeoutExpired:  # it often waits out its own grace period (30 s): the group is killed instead
        os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=10)
    # `ray start` notes its head for later ray.init() calls on this machine: it is gone now
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    if current.exists() and current.read_text().strip().endswith(f":{port}"):
        current.unlink()


def ray_status(joining: dict) -> int:
    env = {**os.environ, **joining}
    return subprocess.run([RAY, "status", f"--address={joining['RAY_ADDRESS']}"], env=env, capture_output=True,
                          timeout=60).returncode  # fmt: skip


@pytest.fixture(scope="module")
def ray_stack(django_db_setup, django_db_blocker, ray_cluster):
    stack = Stack(name="ray-", env=ray_cluster, queues="ray").start()
    yield stack
    stack.stop()
    assert not stack.server_errors(), stack.server_errors()


@pytest.fixture
def on_ray(ray_stack, transactional_db):
    if ray_stack.worker.poll() is not None:  # a test killed it
        ray_stack.start_worker()
    return ray_stack


def cpus_in_use(joining: dict) -> float:
    """The CPUs the cluster's placement groups and actors hold now, as `ray status` reports them."""
    env = {**os.environ, **joining}
    out = subprocess.run([RAY, "status", f"--address={joining['RAY_ADDRESS']}"], env=env, capture_output=True,
                         text=True, timeout=60).stdout  # fmt: skip
    return float(re.search(r"([\d.]+)/[\d.]+ CPU", out).group(1))


@pytest.fixture
def ray_page(chromium, on_ray):
    with browser_page(chromium, on_ray.url) as page:
        yield page


def actor_pids(run_id: int) -> dict[int, int]:
    """Rollout actor -> pid, from the lines the run logged as its actors came up."""
    found = {}
    for text in LogLine.objects.filter(run_id=run_id).values_list("text", flat=True):
        match = re.match(r"rollout actor (\d+): pid (\d+) on ", text)
        if match:
            found[int(match.group(1))] = int(match.group(2))
    return found


def streaming(page, run_id: int) -> bool:
    """The page shows the run running with live points; a run that ended instead fails the test at once."""
    run = Run.objects.get(id=run_id)
    assert not run.is_final, f"the run ended {run.state}: {run.detail}"
    state, points = page_state(page)
    return state == "running" and points > 0


def test_a_ray_run_launched_in_the_browser_streams_live_and_cancels_within_5_seconds(ray_page, alice, on_ray):
    page = ray_page
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=grpo")
    fill_knob(page, "schedule.steps", "100000")
    open_section(page, "resources.executor")
    page.select_option("[name='resources.executor']", "ray")
    fill_knob(page, "resources.actor_cpus", "0.5")
    page.click("#launch-submit")
    page.wait_for_url("**/runs/*/")
    run_id = int(page.url.rstrip("/").split("/")[-1])
    run = Run.objects.get(id=run_id)
    assert run.queue == "ray" and run.config["resources"]["executor"] == "ray"

    wait_until(lambda: streaming(page, run_id), 240, interval=0.2, what="live points while the run trains on Ray")
    wait_until(lambda: Run.objects.get(id=run_id).step >= 1, 120, what="a training step")  # points at 0: evaluation
    assert sorted(actor_pids(run_id)) == [0, 1]  # sampled by the cluster's actors, not in the worker

    asked = time.time()
    page.click("#cancel-button")
    wait_until(lambda: Run.objects.get(id=run_id).state == "cancelled", 5, what="cancelled within 5 s")
    print(f"cancel of a Ray run took {time.time() - asked:.2f} s")
    wait_until(lambda: page_state(page)[0] == "cancelled", 15, what="the page to say cancelled")
    assert [(t.from_state, t.to_state) for t in Transition.objects.filter(run_id=run_id)] == [
        ("", "queued"), ("queued", "running"), ("running", "cancelled")]  # fmt: skip


def launch_long_ray_run(stack, alice, name: str) -> int:
    from rolloutlab.accounts.models import ApiToken

    token = ApiToken.issue(alice, "tests")[1]
    config = {**SMALL_RUN, "schedule": {"steps": 100_000, "save_final": False}, "eval": {"every": 0, "size": 16},
              "resources": {"device": "cpu", "executor": "ray", "actor_cpus": 0.5}}  # fmt: skip
    status, body = stack.api(token, "POST", "/api/runs", {"config": config, "name": name})
    assert status == 201, body
    wait_until(lambda: Run.objects.get(id=body["id"]).step >= 2, 240, what="the run to train on Ray")
    return body["id"]


def test_a_killed_rollout_actor_fails_the_platform_run_with_its_cause_within_60_seconds(on_ray, alice):
    run_id = launch_long_ray_run(on_ray, alice, "actor to kill")
    pid = actor_pids(run_id)[1]
    killed = time.time()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: Run.objects.get(id=run_id).state == "failed", 60, interval=0.5, what="failed within 60 s")
    print(f"the run failed {time.time() - killed:.1f} s after its actor was killed")
    detail = Run.objects.get(id=run_id).detail
    assert detail.startswith("RolloutActorLost: rollout actor 1 (pid ") and f"pid {pid} on " in detail, detail


def test_a_killed_driver_sends_the_run_back_to_the_queue_and_leaves_nothing_of_it_on_the_cluster(
    on_ray, alice, ray_cluster
):
    """kill -9 of the worker that drives a Ray run: back to the queue within the heartbeat timeout, as a local run
    (for a new attempt to resume); its learner and actors are owned by the dead driver, so Ray removes them and
    frees the cluster."""
    run_id = launch_long_ray_run(on_ray, alice, "driver to kill")
    # the learner's 2 and the actors' 0.5 each; `ray status` shows what the nodes last reported, a moment late
    wait_until(lambda: cpus_in_use(ray_cluster) == 3.0, 60, interval=2, what="the run's CPUs to show as in use")
    on_ray.kill_worker()
    killed = time.time()
    wait_until(lambda: Run.objects.get(id=run_id).state == "queued", 60, interval=0.5, what="re-queued within 60 s")
    assert "no heartbeat" in Run.objects.get(id=run_id).detail
    print(f"the run was re-queued {time.time() - killed:.1f} s after its driver was killed")
    wait_until(lambda: cpus_in_use(ray_cluster) == 0.0, 60, interval=2, what="the cluster to free the run's CPUs")
    # no worker is left to take it: cancelled, so that the next test's worker does not inherit a long run
    assert services.request_cancel(Run.objects.get(id=run_id), alice)
