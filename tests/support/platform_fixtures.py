"""Fixtures of the platform tests: a small run config, the live stack (daphne, a Celery worker), Chromium,
and the embedded mode's server (SQLite, no Redis)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager

import pytest

SMALL_RUN = {
    "method": "grpo",
    "model": {"hidden_size": 32, "layers": 2, "heads": 2, "warmup_steps": 150},
    "task": {"name": "arith", "digits": 1, "operands": 2, "operators": "+-"},
    "rollout": {"group_size": 4, "prompts_per_step": 4, "max_new_tokens": 4},
    "schedule": {"steps": 4, "minibatches": 1, "save_final": False},
    "eval": {"every": 2, "size": 16, "k": 2},
    "resources": {"device": "cpu"},
}


@pytest.fixture(scope="session")
def live_stack(django_db_setup, django_db_blocker):
    """daphne + a Celery worker on the test database, for the whole session."""
    import redis
    from django.conf import settings

    from tests.support.live import LOGS, Stack

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # no stale runs from an earlier session
    for old in LOGS.glob("*.log") if LOGS.exists() else []:
        old.unlink()
    stack = Stack().start()
    yield stack
    stack.stop()
    assert not stack.server_errors(), stack.server_errors()


@pytest.fixture(scope="session", autouse=True)
def flush_retries_a_deadlock():
    """A transactional test's teardown (Django's flush: one TRUNCATE of every table) tried again when PostgreSQL
    picks it as a deadlock's victim. The session's live stack stays up on the worker's test database when its
    database-tier tests run, and its monitor's round may hold one table while the TRUNCATE holds another; a
    deadlock victim is retried, as PostgreSQL's documentation says of any transaction it aborts so."""
    import psycopg
    from django.core.management.base import CommandError
    from django.core.management.commands import flush

    handle = flush.Command.handle

    def deadlocked(exc: BaseException | None) -> bool:
        while exc is not None:
            if isinstance(exc, psycopg.errors.DeadlockDetected):
                return True
            exc = exc.__cause__ or exc.__context__
        return False

    def retrying(self, **options):
        for attempt in range(4):
            try:
                return handle(self, **options)
            except CommandError as exc:
                if attempt == 3 or not deadlocked(exc):
                    raise
                time.sleep(0.25 * (attempt + 1))

    flush.Command.handle = retrying
    yield
    flush.Command.handle = handle


@pytest.fixture
def stack(live_stack, transactional_db):
    """The live stack, with a database whose writes the other processes see."""
    if live_stack.worker.poll() is not None:  # a test killed it
        live_stack.start_worker()
    if live_stack.web.poll() is not None:
        live_stack.spawn_web()
        live_stack.wait_http()
    return live_stack


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium from Debian's package, per module: Playwright's event loop, which runs in
    this thread while it is open, must be gone before tests that run their own loop."""
    from playwright.sync_api import sync_playwright

    from tests.support.live import CHROMIUM, CHROMIUM_ARGS

    # Playwright's sync API keeps an event loop running in this thread; the test's own ORM
    # calls are still plain synchronous code, which Django otherwise refuses beside a loop.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()
    del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@contextmanager
def browser_page(chromium, url: str):
    """A page in a fresh browser context on `url`; any response >= 500 fails the test."""
    context = chromium.new_context(base_url=url)
    page = context.new_page()
    failures = []
    page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    yield page
    context.close()
    assert not failures, failures


@pytest.fixture
def page(chromium, stack, tmp_path):
    with browser_page(chromium, stack.url) as page:
        yield page


@pytest.fixture
def embedded(tmp_path):
    """daphne in the embedded mode on a fresh SQLite file, with the user erin: (its URL, tmp_path)."""
    env = embedded_env(tmp_path)
    server, url = serve_embedded(tmp_path, env)
    yield url, tmp_path
    stop_embedded(server, tmp_path)


def embedded_env(tmp_path) -> dict[str, str]:
    """The environment of the embedded mode over tmp_path's SQLite file and storage, migrated, with the user erin."""
    from tests.support.live import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(SQLITE_PATH=str(tmp_path / "db.sqlite3"), STORAGE_ROOT=str(tmp_path / "storage"), PYTHONUNBUFFERED="1")
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "demo_user", "--username", "erin", "--password", "erin"], cwd=ROOT, env=env, check=True)
    return env


def serve_embedded(tmp_path, env) -> tuple[subprocess.Popen, str]:
    """daphne serving the embedded platform (its log appended to tmp_path/daphne.log), once it answers: (it, URL)."""
    from tests.support.live import ROOT, free_port

    port = free_port()
    log = open(tmp_path / "daphne.log", "ab")
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
    return server, url


def stop_embedded(server: subprocess.Popen, tmp_path, timeout: float = 15) -> None:
    """SIGTERM, as Ctrl-C or a service manager stops it; it must exit within `timeout` s and have logged no 500."""
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=timeout)
    text = (tmp_path / "daphne.log").read_text(errors="replace")
    assert "Internal Server Error" not in text, text[-3000:]


def open_section(page, knob: str) -> None:
    """Open the launch form's folded section that holds `knob` ("schedule.steps"), as a user does."""
    section = page.locator(f"#section-{knob.split('.')[0]}")
    if not section.evaluate("details => details.open"):
        section.locator("summary").click()


def fill_knob(page, knob: str, value: str) -> None:
    open_section(page, knob)
    page.fill(f"[name='{knob}']", value)


@pytest.fixture
def probe_queue():
    """A queue of the test Redis that no worker serves, emptied afterwards."""
    from rolloutlab.celery import app

    name = f"probe-{uuid.uuid4().hex[:8]}"
    yield name
    with app.connection_for_write() as connection:
        connection.default_channel.client.delete(name)
