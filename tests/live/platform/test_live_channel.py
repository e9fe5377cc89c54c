"""The live channel holds: an idle run page keeps its websocket, and a Redis restart costs one reconnect.

On a PostgreSQL and a Redis of this module's own (tests/support/throwaway.py), so the restart touches nothing
else. The page counts its socket's opens and closes (run_detail.js: data-socket-opens, data-socket-closes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support.live import ROOT, Stack, wait_until
from tests.support.throwaway import Postgres, Redis

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
IDLE_S = 60
PASSWORD = "idle-password"
MAKE_RUN = (
    "import django; django.setup(); from django.contrib.auth import get_user_model; "
    "from rolloutlab.runs.access import project_for_launch; from rolloutlab.runs.models import Run; "
    f"u = get_user_model().objects.create_user('idle', password='{PASSWORD}'); "
    "r = Run.objects.create(project=project_for_launch(u, 'p'), name='quiet', owner=u, config={}, "
    "config_hash='0' * 64, state='running', total_steps=10); print(r.id)"
)


@pytest.fixture(scope="module")
def quiet_run():
    """daphne on its own database and Redis, and a run that is running but reports nothing (a slow GPU step)."""
    with Postgres() as pg, Redis() as rd:
        pg.migrate()
        env = {"DATABASE_URL": pg.url, "REDIS_URL": rd.url, "DJANGO_SETTINGS_MODULE": "rolloutlab.settings"}
        made = subprocess.run([sys.executable, "-c", MAKE_RUN], cwd=ROOT, env={**os.environ, **env},
                              check=True, capture_output=True, text=True)  # fmt: skip
        stack = Stack(database_url=pg.url, redis_url=rd.url, name="channel-")
        stack.spawn_web()
        stack.wait_http()
        try:
            yield stack, rd, int(made.stdout.strip().splitlines()[-1])
        finally:
            stack.stop()


@pytest.fixture
def run_page(chromium, quiet_run):
    stack, _, run_id = quiet_run
    context = chromium.new_context(base_url=stack.url)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", "idle")
    page.fill("input[name=password]", PASSWORD)
    page.click("#login-submit")
    page.wait_for_url("**/runs/")
    page.goto(f"/runs/{run_id}/")
    wait_until(lambda: sockets(page)["opens"] == 1, 30, what="the page's websocket")
    yield page
    context.close()


def sockets(page) -> dict:
    return page.eval_on_selector(
        "#run", "el => ({opens: Number(el.dataset.socketOpens ?? 0), closes: Number(el.dataset.socketCloses ?? 0)})"
    )


def test_an_idle_run_page_keeps_its_websocket_for_a_minute(run_page):
    time.sleep(IDLE_S)
    assert sockets(run_page) == {"opens": 1, "closes": 0}


def test_after_a_redis_restart_the_first_reconnect_succeeds(quiet_run, run_page):
    """While Redis is away each try is accepted and closed at once with 4503 (the page counts it as an open and a
    close); once it is back, the next try holds."""
    _, redis, _ = quiet_run
    redis.stop()
    wait_until(lambda: sockets(run_page)["closes"] >= 1, 30, what="the socket to close with Redis gone")
    time.sleep(3)  # the page tries again every second meanwhile, and each try is refused
    redis.start()  # returns once Redis answers
    failed_before = sockets(run_page)["closes"]
    wait_until(lambda: connected_for(run_page, 2), 20, what="the reconnect")
    held = sockets(run_page)
    time.sleep(IDLE_S / 4)  # and it holds
    assert sockets(run_page) == held
    assert held["closes"] - failed_before <= 1  # at most the try that was under way as Redis came back


def connected_for(page, seconds: float) -> bool:
    """One socket open, still the same one `seconds` later: a try refused while Redis was coming back is open
    between its accept and its 4503 close, and on a loaded machine that moment is long enough to be seen."""
    seen = sockets(page)
    if seen["opens"] != seen["closes"] + 1:
        return False
    time.sleep(seconds)
    return sockets(page) == seen
