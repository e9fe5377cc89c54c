"""Shared set-up of the platform benchmarks: a fresh PostgreSQL database, Django on it, a user and a run.

from _platform import setup_django, make_run
setup_django("rolloutlab_bench_series")   # drops and recreates the database, migrates
run = make_run("series")
"""

from __future__ import annotations

import os
import sys
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


def setup_django(database: str) -> dict[str, str]:
    """Point Django at a fresh database and migrate it; returns the environment a server process needs."""
    env = {
        "DATABASE_URL": fresh_database(database),
        "REDIS_URL": REDIS,
        "SECRET_KEY": "bench",
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

    from rolloutlab.runs.models import Project, Run

    user, _ = get_user_model().objects.get_or_create(username="bench")
    project, _ = Project.objects.get_or_create(name="bench", defaults={"owner": user})
    return Run.objects.create(project=project, name=name, owner=user, config={}, config_hash="0" * 64, state=state)
