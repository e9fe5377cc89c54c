"""Shared set-up of the platform benchmarks: a fresh PostgreSQL database, Django on it, a user and a run.

from _platform import setup_django, make_run
setup_django("rolloutlab_bench_series")   # drops and recreates the database, migrates
run = make_run("series")
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = "postgres://postgres@127.0.0.1:5432"
REDIS = "redis://127.0.0.1:6379/14"


def fresh_database(name: str) -> str:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{SERVER}/{name}"


def bench_signing_key() -> str:
    """A throwaway Ed25519 key (base64 of 32 random bytes): benchmarks sign nothing that leaves them."""
    import base64

    return base64.b64encode(os.urandom(32)).decode()


def setup_django(database: str) -> dict[str, str]:
    """Point Django at a fresh database and migrate it; returns the environment a server process needs."""
    env = {
        "DATABASE_URL": fresh_database(database),
        "REDIS_URL": REDIS,
        "SECRET_KEY": "bench",
        "BUNDLE_SIGNING_KEY": os.environ.get("BUNDLE_SIGNING_KEY") or bench_signing_key(),
        "DJANGO_SETTINGS_MODULE": "rolloutlab.settings",
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
    }
    os.environ.update(env)
    sys.path.insert(0, str(REPO / "platform"))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


def make_run(name: str, state: str = "running"):
    from django.contrib.auth import get_user_model

    from rolloutlab.runs.access import project_for_launch
    from rolloutlab.runs.models import Run

    user, _ = get_user_model().objects.get_or_create(username="bench")
    project = project_for_launch(user, "bench")  # in the user's own team, as a launch from the browser makes it
    return Run.objects.create(project=project, name=name, owner=user, config={}, config_hash="0" * 64, state=state)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env: dict, port: int, checkout: Path = REPO) -> subprocess.Popen:
    """daphne from `checkout` (this one, or a worktree of another commit), once it answers."""
    command = [sys.executable, "-m", "daphne", "-p", str(port), "rolloutlab.asgi:application"]
    server = subprocess.Popen(command, cwd=checkout, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=1)
            return server
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"daphne from {checkout} did not start")
