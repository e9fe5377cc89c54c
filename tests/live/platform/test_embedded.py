"""The embedded mode: no DATABASE_URL, no REDIS_URL. SQLite, the in-memory channel layer,
runs executed in a thread of the web process; what `make demo` starts."""

import time

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
