"""Outages at the edge, end to end, on a PostgreSQL and a Redis of this module's own (tests/support/throwaway.py).

1. A NaN (and infinities) mid-run: the run finishes, every point is stored, and the
   browser draws every later point live, the non-finite ones as marked gaps.
2. PostgreSQL, then Redis, stopped for 10 s each mid-run and restarted: pages and API
   answer 503 meanwhile (never 500), no reported point is lost, the run finishes, and
   the browser's chart resumes after each outage.

The worker reports through tests/support/fault_tap.py, which also records what it reported.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter

import psycopg
import pytest

from tests.support.live import ROOT, Stack, wait_until
from tests.support.platform_fixtures import SMALL_RUN
from tests.support.throwaway import Postgres, Redis

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
OUTAGE_S = 10
PASSWORD = "ops-password"
MAKE_USER = (
    "import django; django.setup(); from django.contrib.auth import get_user_model; "
    "from rolloutlab.accounts.models import ApiToken; "
    f"u = get_user_model().objects.create_user('ops', password='{PASSWORD}'); print(ApiToken.issue(u, 'fault')[1])"
)


@pytest.fixture(scope="module")
def services():
    with Postgres() as pg, Redis() as rd:
        pg.migrate()
        env = {"DATABASE_URL": pg.url, "REDIS_URL": rd.url, "DJANGO_SETTINGS_MODULE": "rolloutlab.settings"}
        made = subprocess.run([sys.executable, "-c", MAKE_USER], cwd=ROOT, env={**os.environ, **env},
                              check=True, capture_output=True, text=True)  # fmt: skip
        yield pg, rd, made.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def fault_stack(services, tmp_path_factory):
    pg, rd, _ = services
    tap = tmp_path_factory.mktemp("tap") / "reported.jsonl"
    stack = Stack(database_url=pg.url, redis_url=rd.url, env={"FAULT_TAP": str(tap)},
                  worker_include="tests.support.fault_tap", name="outages-")  # fmt: skip
    for old in stack_logs(stack):
        old.unlink()
    stack.tap = tap
    stack.start()
    yield stack
    stack.stop()


def stack_logs(stack):
    from tests.support.live import LOGS

    return [p for p in LOGS.glob(f"{stack.name}*.log")] if LOGS.exists() else []


@pytest.fixture
def browser_page(chromium, fault_stack):
    context = chromium.new_context(base_url=fault_stack.url)
    page = context.new_page()
    page.statuses = Counter()
    page.on("response", lambda r: page.statuses.update([r.status]))
    page.goto("/login/")
    page.fill("input[name=username]", "ops")
    page.fill("input[name=password]", PASSWORD)
    page.click("#login-submit")
    page.wait_for_url("**/runs/")
    yield page
    context.close()


def query(pg, sql: str, *params):
    with psycopg.connect(pg.url.replace("postgres://", "postgresql://"), connect_timeout=3) as conn:
        return conn.execute(sql, params).fetchall()


def run_row(pg, run_id: int) -> tuple[str, int]:
    return query(pg, "SELECT state, step FROM runs_run WHERE id = %s", run_id)[0]


def reported(stack) -> int:
    """Points the worker reported, as its tap recorded them (the runs here have no evaluation)."""
    lines = [json.loads(line) for line in stack.tap.read_text().splitlines()]
    return sum(len(entry["names"]) for entry in lines)


def stored(pg, run_id: int) -> int:
    return query(pg, "SELECT count(*) FROM metrics_metricpoint WHERE run_id = %s", run_id)[0][0]


def live(page) -> dict:
    return page.eval_on_selector(
        "#run",
        """el => ({
        state: el.dataset.state, points: Number(el.dataset.livePoints), last: Number(el.dataset.lastLiveStep ?? -1),
        unavailable: Number(el.dataset.unavailableCloses ?? 0),
        lossX: (document.querySelector('.chart[data-key="policy/loss"]')?.data ?? [{x: []}])[0].x.slice(),
        lossY: (document.querySelector('.chart[data-key="policy/loss"]')?.data ?? [{y: []}])[0].y.slice(),
        marks: Number(document.querySelector('.chart[data-key="policy/loss"]')?.dataset.nonfinite ?? 0)})""",
    )


def event_outline(frame: str) -> str:
    """A websocket event in a few words: its kind, step, and the steps of policy/loss it carries."""
    event = json.loads(frame)
    loss = [point[0] for point in event.get("points", {}).get("policy/loss", [])]
    return f"{event.get('kind')} step={event.get('step')} state={event.get('state')} loss={loss}"


def launch(stack, token, steps=None, time_limit_s=None) -> int:
    schedule = {"steps": steps or 100_000, "save_final": False}
    if time_limit_s:
        schedule["time_limit_s"] = time_limit_s
    config = {**SMALL_RUN, "schedule": schedule, "eval": {"every": 0, "size": 16}}
    status, body = stack.api(token, "POST", "/api/runs", {"config": config, "name": "outage"})
    assert status == 201, body
    return body["id"]


def test_a_nan_mid_run_leaves_every_later_point_stored_and_drawn_live(services, fault_stack, browser_page):
    pg, _, token = services
    fault_stack.tap.write_text("")
    hold = fault_stack.tap.with_name(fault_stack.tap.name + ".hold")
    hold.write_text("")  # the run waits before its first step until the page watches it
    try:
        run_id = launch(fault_stack, token, steps=8)
        frames = []  # what the page's websocket received, in order: named when a step is missing from the chart
        browser_page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
        browser_page.goto(f"/runs/{run_id}/")
        wait_until(lambda: browser_page.eval_on_selector("#run", "el => Number(el.dataset.socketOpens ?? 0)"), 30,
                   what="the page's websocket")  # fmt: skip
    finally:
        hold.unlink()  # every point now arrives over the websocket (and the next test's run is not held)
    wait_until(lambda: run_row(pg, run_id)[0] in ("succeeded", "failed", "lost"), 120, interval=0.5, what="the end")
    assert run_row(pg, run_id) == ("succeeded", 8)
    assert stored(pg, run_id) == reported(fault_stack)  # every point, the non-finite ones included
    kinds = query(pg, "SELECT p.step, k.name, p.kind FROM metrics_metricpoint p JOIN metrics_metrickey k "
                      "ON k.id = p.key_id WHERE p.run_id = %s AND p.kind > 0 ORDER BY 1", run_id)  # fmt: skip
    assert kinds == [(3, "policy/loss", 1), (4, "reward/mean", 2), (5, "policy/loss", 3)]
    wait_until(lambda: live(browser_page)["last"] == 8, 15, what="the last step drawn live")
    seen = live(browser_page)
    assert seen["lossX"] == list(range(1, 9)), [event_outline(frame) for frame in frames]  # 4..8 after the NaN too
    assert seen["lossY"][2] is None and seen["lossY"][4] is None and None not in seen["lossY"][5:]
    assert seen["marks"] == 2
    assert "2 not finite" in browser_page.text_content('.chart[data-key="policy/loss"] .gtitle')
    browser_page.reload()  # read back over HTTP this time: the same gaps and marks
    wait_until(lambda: live(browser_page)["marks"] == 2, 30, what="the marks from the stored series")
    assert live(browser_page)["lossY"][2] is None and live(browser_page)["lossX"] == list(range(1, 9))
    assert not [s for s in browser_page.statuses if s >= 500]


def poll_outage(stack, page, token, run_id: int, seconds: float, launch_too: bool) -> Counter:
    """Pages and API, asked again and again while a service is down: what they answered."""
    seen, until = Counter(), time.time() + seconds
    csrf = page.eval_on_selector("input[name=csrfmiddlewaretoken]", "el => el.value")
    while time.time() < until:
        seen[("api", stack.api(token, "GET", f"/api/runs/{run_id}")[0])] += 1
        seen[("page", page.request.get(f"/runs/{run_id}/").status)] += 1
        if launch_too:  # the one thing that needs Redis: launching (here the API's and the page's rerun)
            seen[("api launch", stack.api(token, "POST", "/api/runs", {"config": SMALL_RUN})[0])] += 1
            rerun = page.request.post(f"/runs/{run_id}/rerun/", form={"csrfmiddlewaretoken": csrf}, max_redirects=0)
            seen[("page launch", rerun.status)] += 1
        time.sleep(0.3)
    return seen


def test_a_run_outlives_a_postgres_and_a_redis_outage_and_its_chart_resumes(services, fault_stack, browser_page):
    pg, rd, token = services
    began = time.time()
    fault_stack.tap.write_text("")
    run_id = launch(fault_stack, token, time_limit_s=45)
    browser_page.goto(f"/runs/{run_id}/")
    wait_until(lambda: live(browser_page)["last"] >= 3, 120, what="live points before the outage")

    pg.stop()
    db_outage = poll_outage(fault_stack, browser_page, token, run_id, OUTAGE_S, launch_too=False)
    pg.start()
    resumed_from = live(browser_page)["last"]
    wait_until(lambda: live(browser_page)["last"] > resumed_from + 2, 60, what="the chart to resume after PostgreSQL")

    rd.stop()
    redis_outage = poll_outage(fault_stack, browser_page, token, run_id, OUTAGE_S, launch_too=True)
    rd.start()
    resumed_from = live(browser_page)["last"]
    wait_until(lambda: live(browser_page)["last"] > resumed_from + 2, 60, what="the chart to resume after Redis")

    wait_until(lambda: run_row(pg, run_id)[0] != "running", 120, interval=0.5, what="the run to end")
    state, last_step = run_row(pg, run_id)
    points_stored, points_reported = stored(pg, run_id), reported(fault_stack)
    log = [t for (t,) in query(pg, "SELECT text FROM runs_logline WHERE run_id = %s ORDER BY id", run_id)]
    wait_until(lambda: live(browser_page)["last"] == last_step, 30, what="the page to hold the last step")
    closes = live(browser_page)["unavailable"]
    print(f"\npoints stored {points_stored} / reported {points_reported} over {last_step} steps; "
          f"during the PostgreSQL outage {dict(db_outage)}; during the Redis outage {dict(redis_outage)}; "
          f"websocket closes with 4503: {closes}; wall {time.time() - began:.1f} s")  # fmt: skip

    assert state == "succeeded", log[-3:]
    assert points_stored == points_reported and points_reported >= 10 * last_step  # nothing lost, nothing doubled
    assert any("retried" in line and "nothing lost" in line for line in log), log
    assert {kind for kind, _ in db_outage} == {"api", "page"}
    assert {status for _, status in db_outage} == {503}
    assert {status for kind, status in redis_outage if "launch" in kind} == {503}
    assert all(status < 500 for kind, status in redis_outage if "launch" not in kind)  # reads need no Redis
    assert live(browser_page)["unavailable"] >= 1  # the socket was refused with 4503 and came back
    assert not [s for s in browser_page.statuses if s >= 500 and s != 503]
    assert not fault_stack.server_errors()
    assert not re.search(r"Traceback", "\n".join(log))
