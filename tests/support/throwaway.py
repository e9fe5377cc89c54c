"""A PostgreSQL and a Redis of a test's own, from the system's binaries, that the test may stop and restart.

    with Postgres() as pg, Redis() as rd:
        pg.stop(); ...; pg.start()     # the same port and data: a restart, as an outage would end

Each serves one test (a live stack pointed at them through Stack(database_url=..., redis_url=...));
nothing else on the machine sees them, so taking them down harms no other test.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.services import free_port, postgres_binary, wait_for

ROOT = Path(__file__).resolve().parents[2]
MIGRATED: dict[str, Path] = {}  # database name -> a stopped server's data directory, migrated


def _as_postgres() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


class Postgres:
    def __init__(self, database: str = "rolloutlab"):
        # under a directory the postgres user may enter (pytest's own tmp is root's alone)
        self.root = Path(tempfile.mkdtemp(prefix="rl-throwaway-pg-"))
        self.root.chmod(0o755)
        self.data, self.database, self.port = self.root / "data", database, free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> Postgres:
        if self.data.exists():
            shutil.rmtree(self.data)
        self.data.mkdir(parents=True)
        if _as_postgres():
            shutil.chown(self.data, "postgres")
        subprocess.run([*_as_postgres(), postgres_binary("initdb"), "-D", str(self.data), "-U", "postgres",
                        "-A", "trust", "--no-sync"], check=True, capture_output=True)  # fmt: skip
        self.start()
        subprocess.run([*_as_postgres(), postgres_binary("createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                        "-U", "postgres", self.database], check=True, capture_output=True)  # fmt: skip
        return self

    def pg_ctl(self, *args: str) -> None:
        subprocess.run([*_as_postgres(), postgres_binary("pg_ctl"), "-D", str(self.data), "-w", *args],
                       check=True, capture_output=True)  # fmt: skip

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -h 127.0.0.1 -c fsync=off"
        self.pg_ctl("-o", options, "-l", str(self.data / "server.log"), "start")
        wait_for("127.0.0.1", self.port, "the throwaway PostgreSQL")

    def stop(self) -> None:
        """A fast shutdown: open sessions are ended, as in a restart or a failover."""
        self.pg_ctl("-m", "fast", "stop")

    def migrate(self) -> None:
        """The platform's tables, as `manage.py migrate` makes them: the first time in this process by migrating
        (8 to 15 s), then by copying that server's data directory, kept aside while it was stopped (a second)."""
        template = MIGRATED.get(self.database)
        if template is None:
            env = {**os.environ, "DATABASE_URL": self.url}
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                           capture_output=True)  # fmt: skip
        self.stop()
        if template is None:
            template = MIGRATED[self.database] = Path(tempfile.mkdtemp(prefix="rl-migrated-pg-")) / "data"
            template.parent.chmod(0o755)
            subprocess.run(["cp", "-a", str(self.data), str(template)], check=True)  # -a: the postgres user's files
            atexit.register(shutil.rmtree, template.parent, True)
        else:
            shutil.rmtree(self.data)
            subprocess.run(["cp", "-a", str(template), str(self.data)], check=True)
        self.start()

    def __exit__(self, *exc) -> None:
        try:
            self.pg_ctl("-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)


class Redis:
    def __init__(self):
        self.port, self.server = free_port(), None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> Redis:
        self.start()
        return self

    def start(self) -> None:
        self.server = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for("127.0.0.1", self.port, "the throwaway Redis")

    def stop(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=10)

    def __exit__(self, *exc) -> None:
        if self.server.poll() is None:
            self.stop()
