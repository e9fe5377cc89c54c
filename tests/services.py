"""Real services for the tests: PostgreSQL and Redis, reached or started, before Django is configured.

Loaded as a pytest plugin (`-p tests.services` in pyproject.toml) so that it runs
before pytest-django reads the settings. Where DATABASE_URL / REDIS_URL are set,
they are used as they are. Otherwise the local servers on their usual ports are
used when they answer, and when they do not, throwaway ones are started from the
system's `postgres` and `redis-server` binaries under .cache/services/.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import glob
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".cache" / "services"
TEST_SIGNING_KEY = base64.b64encode(hashlib.sha256(b"rollout lab tests only").digest()).decode()


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(host: str, port: int, what: str, seconds: float = 30) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if answers(host, port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start on {host}:{port}")


def postgres_binary(name: str) -> str:
    found = shutil.which(name) if name != "postgres" else None
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if found or candidates:
        return found or candidates[0]
    raise RuntimeError(f"PostgreSQL is not reachable on 127.0.0.1:5432 and no '{name}' binary is installed")


def start_postgres() -> str:
    port, data = free_port(), STATE / "postgres"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    user = "postgres"
    run_as = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
    if run_as:
        shutil.chown(data, "postgres")
    subprocess.run([*run_as, postgres_binary("initdb"), "-D", str(data), "-U", user, "-A", "trust"],
                   check=True, capture_output=True)  # fmt: skip
    server = subprocess.Popen(
        [*run_as, postgres_binary("postgres"), "-D", str(data), "-p", str(port), "-k", str(data), "-h", "127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    atexit.register(server.terminate)
    wait_for("127.0.0.1", port, "PostgreSQL")
    return f"postgres://{user}@127.0.0.1:{port}/rolloutlab"


def start_redis() -> str:
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    atexit.register(server.terminate)
    wait_for("127.0.0.1", port, "Redis")
    return f"redis://127.0.0.1:{port}/15"


def ensure_services() -> None:
    # torch's OpenMP threads sleep at once when idle instead of spinning: the tiny model's ops are too small to
    # keep two threads busy, and spinning threads take the core that the other pytest-xdist worker (and the
    # live tests' servers) need; measured on the pinned streams: a quarter less CPU time for 12% more wall time
    # alone. Set before torch is imported, here and in every process the tests start.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "DATABASE_URL" not in os.environ:
        local = answers("127.0.0.1", 5432)
        os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/rolloutlab" if local else start_postgres()
    if "REDIS_URL" not in os.environ:
        # database 15: the tests flush it, so keep it apart from anything else on the server
        os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/15" if answers("127.0.0.1", 6379) else start_redis()
    os.environ.setdefault("ROLLOUTLAB_CACHE", str(ROOT / ".cache" / "rolloutlab"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rolloutlab.settings")
    os.environ.setdefault("SECRET_KEY", "tests-only-secret-0123456789-abcdefghijklmnopqrstuvwxyz")  # 50+, as required
    # this test deployment's bundle signing key (Ed25519, the base64 of 32 bytes): fixed, and for tests only
    os.environ.setdefault("BUNDLE_SIGNING_KEY", TEST_SIGNING_KEY)
    # fast heartbeats, so that a killed worker's run is declared lost within seconds; the timeout still leaves a
    # live worker room on a loaded 2-core machine, where a Ray driver joining its cluster was seen to hold its
    # heartbeat thread off for over 6 s (production waits 30 s)
    os.environ.setdefault("HEARTBEAT_INTERVAL_S", "1")
    os.environ.setdefault("HEARTBEAT_TIMEOUT_S", "15")
    isolate_xdist_worker()


def isolate_xdist_worker() -> None:
    """Under pytest-xdist (make test runs three workers) each worker gets a Redis database and a storage root of its
    own; pytest-django already gives each its own test database (test_rolloutlab_gw0, ...). Two workers' runs
    share ids (each database counts from 1), so one storage root would mix their artifacts, and one Redis
    database their Celery queues and flushes."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    index = int(worker.removeprefix("gw"))
    base, _, db = os.environ["REDIS_URL"].rpartition("/")
    os.environ["REDIS_URL"] = f"{base}/{(int(db or 0) - index) % 16}"  # gw0 keeps the database, gw1 the one below
    os.environ["STORAGE_ROOT"] = str(ROOT / "var" / f"storage-{worker}")


def collect_static() -> None:
    """collectstatic, as every deployment runs it, when static/ or the plotly bundle changed since the last one:
    the live servers serve the hashed, compressed files, and pages name them (compressing Plotly takes seconds).

    Under a file lock: two pytest sessions started at once (two tiers run side by side by hand) would otherwise
    run two `--clear`s at once and delete each other's files."""
    import plotly

    root = Path(os.environ.get("STATIC_ROOT", ROOT / "var" / "static"))
    manifest = root / "staticfiles.json"
    sources = [p for p in (ROOT / "static").rglob("*") if p.is_file()]
    sources.append(Path(plotly.__file__).parent / "package_data" / "plotly.min.js")
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".collectstatic.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if manifest.exists() and manifest.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
            return
        command = [sys.executable, "manage.py", "collectstatic", "--noinput", "--clear", "-v0"]
        subprocess.run(command, cwd=ROOT, check=True)


ensure_services()
collect_static()
