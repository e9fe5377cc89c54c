"""End to end: Chromium, daphne, a Celery worker process, PostgreSQL and Redis, all real.

1. A run launched from the browser goes queued -> running -> succeeded on the worker,
   and its page draws points that arrive over the websocket while it runs.
2. Cancel stops a running run within 5 seconds, and the worker takes the next run.
3. kill -9 of the worker: the run goes back to the queue within the heartbeat timeout (to
   resume on another worker: tests/live/platform/test_resume.py), the page says so, and every
   metric point committed before the kill is still there.
"""

import time

import pytest

from rolloutlab.accounts.models import ApiToken
from rolloutlab.metrics.models import MetricPoint
from rolloutlab.runs.models import Run, Transition
from tests.support.live import wait_until
from tests.support.platform_fixtures import SMALL_RUN, fill_knob

pytestmark = pytest.mark.timeout(600)


def log_in(page, username, password):
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("#login-submit")
    page.wait_for_url("**/runs/")


def page_state(page) -> tuple[str, int]:
    return page.eval_on_selector("#run", "el => [el.dataset.state, Number(el.dataset.livePoints)]")


def test_a_run_launched_in_the_browser_runs_on_the_worker_and_streams_live(page, alice, stack):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/launch/?method=grpo")
    assert page.input_value("#method-picker") == "grpo"
    assert page.input_value("[name='task.name']") == "arith" and page.input_value("[name='model.name']") == "tiny"
    fill_knob(page, "schedule.steps", "20")  # the one knob changed
    page.click("#launch-submit")
    page.wait_for_url("**/runs/*/")
    run_id = int(page.url.rstrip("/").split("/")[-1])

    live_while_running = 0
    deadline = time.time() + 300
    state = ""
    while time.time() < deadline and state not in ("succeeded", "failed", "lost", "cancelled"):
        state, points = page_state(page)
        if state == "running":
            live_while_running = max(live_while_running, points)
        time.sleep(0.1)
    assert state == "succeeded", Run.objects.get(id=run_id).detail
    assert live_while_running > 0  # the chart received points over the websocket before the run ended

    run = Run.objects.get(id=run_id)
    assert run.config["schedule"]["steps"] == 20 and run.method == "grpo" and run.owner == alice
    assert [(t.from_state, t.to_state) for t in Transition.objects.filter(run=run)] == [
        ("", "queued"), ("queued", "running"), ("running", "succeeded")]  # fmt: skip
    assert run.celery_task_id and run.worker_host  # executed by the Celery worker, not the web process
    assert run.step == 20 and 0 <= run.summary["eval/pass@1"] <= 1
    assert MetricPoint.objects.filter(run=run, step=20).count() > 10  # the final metrics are in PostgreSQL
    page.wait_for_selector("#charts .chart .main-svg")
    assert page.locator("#run-state").inner_text() == "succeeded"


@pytest.fixture
def token(alice):
    return ApiToken.issue(alice, "tests")[1]


LONG_RUN = {**SMALL_RUN, "schedule": {"steps": 100_000, "save_final": False}, "eval": {"every": 0, "size": 16}}


def launch(stack, token, config, name):
    status, body = stack.api(token, "POST", "/api/runs", {"config": config, "name": name})
    assert status == 201, body
    return body["id"]


def state_of(run_id):
    return Run.objects.get(id=run_id).state


def test_cancel_stops_a_running_run_within_5_seconds_and_the_worker_takes_the_next(stack, token):
    first = launch(stack, token, LONG_RUN, "to cancel")
    second = launch(stack, token, LONG_RUN, "next in line")
    wait_until(lambda: Run.objects.get(id=first).step >= 2, 180, what="the first run to train")
    assert state_of(second) == "queued"
    asked = time.time()
    assert stack.api(token, "POST", f"/api/runs/{first}/cancel")[0] == 200
    wait_until(lambda: state_of(first) == "cancelled", 5, what="cancelled within 5 s")
    took = time.time() - asked
    wait_until(lambda: state_of(second) == "running", 60, what="the worker to take the next run")
    assert stack.api(token, "POST", f"/api/runs/{second}/cancel")[0] == 200
    wait_until(lambda: state_of(second) == "cancelled", 5, what="the second cancel")
    print(f"cancel took {took:.2f} s")


@pytest.mark.parametrize(
    "phase, config",
    [
        # a warm-start of a minute: a fresh init_seed, so no cached model skips it
        ("warm-up", {**LONG_RUN, "model": {**SMALL_RUN["model"], "warmup_steps": 50_000, "init_seed": 7919}}),
        # an evaluation of 100,000 sampled completions before the first step
        ("evaluation", {**LONG_RUN, "eval": {"every": 1, "size": 100, "k": 1, "samples": 1000}}),
    ],
)
def test_cancel_within_5_seconds_holds_inside_a_long_phase(stack, token, phase, config):
    run_id = launch(stack, token, config, f"long {phase}")
    wait_until(lambda: state_of(run_id) == "running", 120, what="the worker to start the run")
    time.sleep(2)  # well inside the phase: no step has been reported yet
    assert Run.objects.get(id=run_id).step == 0, f"the {phase} ended before the cancel could test it"
    asked = time.time()
    assert stack.api(token, "POST", f"/api/runs/{run_id}/cancel")[0] == 200
    wait_until(lambda: state_of(run_id) == "cancelled", 5, what=f"cancelled within 5 s during the {phase}")
    print(f"cancel during the {phase} took {time.time() - asked:.2f} s")


def test_a_killed_worker_sends_its_run_back_to_the_queue_with_its_committed_metrics(stack, token, page, alice):
    run_id = launch(stack, token, LONG_RUN, "to lose")
    wait_until(lambda: Run.objects.get(id=run_id).step >= 3, 180, what="the run to train")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run_id}/")
    wait_until(lambda: page_state(page)[1] > 0, 30, what="live points on the page")
    stack.kill_worker()
    killed = time.time()
    committed = set(MetricPoint.objects.filter(run_id=run_id).values_list("key_id", "step", "value"))
    assert committed
    wait_until(lambda: state_of(run_id) == "queued", 60, interval=0.5, what="the run to go back to the queue")
    assert time.time() - killed <= 60
    wait_until(lambda: page_state(page)[0] == "queued", 15, what="the page to say queued")
    assert page.locator("#run-state").inner_text() == "queued"
    detail = page.locator("#run-detail").inner_text()
    assert "no heartbeat" in detail and "re-queued for attempt 2" in detail
    after = set(MetricPoint.objects.filter(run_id=run_id).values_list("key_id", "step", "value"))
    assert committed <= after  # nothing committed was lost
    # no worker is left to resume it here: cancelled, so that the next test's worker does not inherit a long run
    assert stack.api(token, "POST", f"/api/runs/{run_id}/cancel")[0] == 200
