"""The live stack for end-to-end tests: daphne and a Celery worker as real processes, and Chromium.

All of them use the test database that pytest-django created, the test Redis
database, and the shared model cache. Their output goes to .cache/live-logs/.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
# one folder per pytest-xdist worker ("main" without xdist): a worker clears its own logs at the start
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
LOGS = ROOT / ".cache" / "live-logs" / XDIST_WORKER
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-quic", "--no-first-run", "--disable-sync"]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Stack:
    """By default on the test database and the test Redis; a test may give its own (tests/support/throwaway.py),
    extra environment, modules for the worker to import (`celery worker --include`) and the queues it serves."""

    def __init__(self, database_url: str | None = None, redis_url: str | None = None, env: dict | None = None,
                 worker_include: str = "", name: str = "", queues: str = "cpu"):  # fmt: skip
        LOGS.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "DATABASE_URL": database_url or test_database_url(), "PYTHONUNBUFFERED": "1",
                    "LOG_LEVEL": "INFO", **(env or {})}  # fmt: skip
        if redis_url:
            self.env["REDIS_URL"] = redis_url
        self.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the servers keep Django's guard
        self.redis_url, self.worker_include, self.name, self.queues = redis_url, worker_include, name, queues
        self.web = self.worker = None
        self.worker_count = 0

    def start(self) -> Stack:
        self.spawn_web()
        self.start_worker()
        self.wait_http()
        return self

    def spawn_web(self) -> None:
        """Start daphne on the stack's port (again, after kill_web); wait_http() waits for it to answer."""
        address = ["-b", "127.0.0.1", "-p", str(self.port)]
        command = [sys.executable, "-m", "daphne", *address, "rolloutlab.asgi:application"]
        self.web = self.spawn(f"{self.name}daphne", command)

    def kill_web(self) -> None:
        """kill -9 the web server, mid-request or not."""
        os.killpg(self.web.pid, signal.SIGKILL)
        self.web.wait(timeout=10)

    def spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        log = open(LOGS / f"{name}.log", "ab")
        return subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip

    def start_worker(self) -> None:
        self.worker_count += 1
        include = ["--include", self.worker_include] if self.worker_include else []
        self.worker = self.spawn(f"{self.name}worker", [
            sys.executable, "-m", "celery", "-A", "rolloutlab", "worker", "-Q", self.queues, "-P", "prefork", "-c", "1",
            "--max-tasks-per-child", "1", "-n", f"{self.worker_name()}@%h", "--without-gossip",
            "--without-mingle", "-l", "info",  # as compose.yaml runs it
            *include,
        ])  # fmt: skip
        self.wait_worker()

    def worker_name(self) -> str:
        """Unique on this host, also between the stacks of two pytest-xdist workers."""
        return f"test-worker-{XDIST_WORKER}-{self.worker_count}"

    def wait_worker(self, seconds: float = 60) -> None:
        from celery import Celery

        from rolloutlab.celery import app

        if self.redis_url:  # the worker listens on a broker of the test's own
            app = Celery(broker=self.redis_url)

        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                replies = app.control.ping(timeout=0.5) or []
            except Exception:  # noqa: BLE001 - a pooled connection a Redis restart closed: ask again on a new one
                app = Celery(broker=self.redis_url) if self.redis_url else app
                time.sleep(0.5)
                continue
            if any(f"{self.worker_name()}@" in name for reply in replies for name in reply):
                return
        raise RuntimeError(f"the Celery worker did not come up; see {LOGS / (self.name + 'worker.log')}")

    def kill_worker(self) -> None:
        """kill -9 the worker: its process and nothing gentler."""
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(timeout=10)

    def wait_http(self, seconds: float = 60) -> None:
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.url + "/login/", timeout=1)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"daphne did not answer; see {LOGS / (self.name + 'daphne.log')}")

    def api(self, token: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def processes(self) -> list:
        """What stop() ends: the worker and daphne (a stack with more workers widens this)."""
        return [self.worker, self.web]

    def stop(self) -> None:
        for proc in self.processes():
            if proc and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)

    def server_errors(self) -> list[str]:
        log = LOGS / f"{self.name}daphne.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return [line for line in text.splitlines() if "Internal Server Error" in line or " 500 " in line]


def wait_until(predicate, seconds: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")
