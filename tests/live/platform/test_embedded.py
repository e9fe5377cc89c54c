"""The embedded mode: no DATABASE_URL, no REDIS_URL. SQLite, the in-memory channel layer,
runs executed in a thread of the web process; what `make demo` starts."""

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.platform_fixtures import fill_knob

pytestmark = pytest.mark.timeout(600)


def test_the_embedded_mode_runs_a_training_and_streams_it(embedded, chromium):
    url, tmp_path = embedded
    context = chromium.new_context(base_url=url)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", "erin")
    page.fill("input[name=password]", "erin")
    page.click("#login-submit")
    page.goto("/runs/launch/?method=rloo")
    for knob, value in {"model.hidden_size": "32", "model.heads": "2", "model.layers": "2", "model.warmup_steps": "150",
                        "task.operands": "2", "schedule.steps": "40", "eval.size": "16"}.items():  # fmt: skip
        fill_knob(page, knob, value)
    page.click("#launch-submit")
    page.wait_for_url("**/runs/*/")
    live, state = 0, ""
    deadline = time.time() + 300
    while time.time() < deadline and state not in ("succeeded", "failed", "cancelled", "lost"):
        state, points = page.eval_on_selector("#run", "el => [el.dataset.state, Number(el.dataset.livePoints)]")
        if state == "running":
            live = max(live, points)
        time.sleep(0.1)
    assert state == "succeeded", page.locator("#run-detail").inner_text()
    assert live > 0
    assert (tmp_path / "db.sqlite3").exists() and any((tmp_path / "storage").rglob("environment.json"))
    context.close()


def test_stopping_the_embedded_server_queues_its_run_and_the_next_start_resumes_it(tmp_path):
    # Ctrl-C or SIGTERM used to leave the server up until its run ended (an hour for a real model): the run thread
    # held the interpreter's exit. Now the run stops at its next stop check, waits in the queue, and resumes from
    # its last checkpoint when the server starts again.
    from tests.configs import small_config
    from tests.support.live import ROOT
    from tests.support.platform_fixtures import embedded_env, serve_embedded, stop_embedded

    env = embedded_env(tmp_path) | {"HEARTBEAT_INTERVAL_S": "1"}  # the monitor's round sends what is queued
    issued = subprocess.run([sys.executable, "manage.py", "issue_token", "erin"], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=True)  # fmt: skip
    token = issued.stdout.strip().splitlines()[-1]
    config = small_config(schedule={"steps": 100_000, "checkpoint_every": 5}).model_dump(mode="json")

    def api(url, method, path, body=None):
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        data = json.dumps(body).encode() if body else None
        request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def wait_for(url, run_id, done, what):
        deadline = time.time() + 180
        while time.time() < deadline:
            run = api(url, "GET", f"/api/runs/{run_id}")
            if done(run):
                return run
            time.sleep(0.5)
        raise AssertionError(f"{what}: {run}")

    server, url = serve_embedded(tmp_path, env)
    run_id = api(url, "POST", "/api/runs", {"config": config, "name": "long"})["id"]
    wait_for(url, run_id, lambda r: r["step"] >= 12, "the run to pass its second checkpoint")
    stopped_at = time.time()
    stop_embedded(server, tmp_path, timeout=60)
    assert time.time() - stopped_at < 60

    server, url = serve_embedded(tmp_path, env)
    try:
        run = wait_for(url, run_id, lambda r: r["attempt"] == 2 and r["state"] == "running", "the run to resume")
        first = run["attempts"][0]
        assert first["outcome"] == "lost" and "the server stopped at step" in first["reason"], first
        stopped_step = int(first["reason"].split("step ")[1].split(";")[0])
        resumed = run["attempts"][1]["resumed_from_step"]
        assert resumed is not None and stopped_step - 5 <= resumed <= stopped_step and resumed % 5 == 0
        wait_for(url, run_id, lambda r: r["step"] > stopped_step + 2, "the resumed run to step on")
        api(url, "POST", f"/api/runs/{run_id}/cancel")
        wait_for(url, run_id, lambda r: r["state"] == "cancelled", "the cancel")
    finally:
        stop_embedded(server, tmp_path, timeout=60)
