"""The embedded mode: no DATABASE_URL, no REDIS_URL. SQLite, the in-memory channel layer,
runs executed in a thread of the web process; what `make demo` starts."""

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.platform.live import ROOT, free_port

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def embedded(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(SQLITE_PATH=str(tmp_path / "db.sqlite3"), STORAGE_ROOT=str(tmp_path / "storage"), PYTHONUNBUFFERED="1")
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "demo_user", "--username", "erin", "--password", "erin"], cwd=ROOT, env=env, check=True)
    port = free_port()
    log = open(tmp_path / "daphne.log", "wb")
    command = [sys.executable, "-m", "daphne", "-p", str(port), "rolloutlab.asgi:application"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/login/", timeout=1)
            break
        except OSError:
            time.sleep(0.2)
    yield url, tmp_path
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=15)
    text = (tmp_path / "daphne.log").read_text(errors="replace")
    assert "Internal Server Error" not in text, text[-3000:]


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
        page.fill(f"[name='{knob}']", value)
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
