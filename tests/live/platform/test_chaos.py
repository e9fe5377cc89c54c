"""The chaos soak: 12 runs launched together on two workers, while a driver injects faults at random times.

On a PostgreSQL and a Redis of this module's own (tests/support/throwaway.py) and a stack it starts itself:
two worker kills (kill -9 of the worker and its child, a new worker started after each), a Redis restart
(it keeps nothing on disk: every queued wake-up is gone), a 10 s PostgreSQL stop and a daphne restart, at times
drawn from a seeded generator (the seed is printed). Then every run must have succeeded, hold every metric point
of its steps exactly once, with the values an undisturbed run of the same config reports (computed here, in this
process, with no platform at all), the open run pages must have caught up with the last step, and nothing may be
left queued.

    make soak                                               # what CI runs after `make test`
    python -m pytest -q -s -m soak tests/live/platform/test_chaos.py   # prints the fault schedule and the timings

It takes about four minutes on two cores, so `make test` leaves it out (-m 'not soak') to stay within its
15-minute budget and `.ci/run` runs it as a step of its own after the suite.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time

import psutil
import psycopg
import pytest

from tests.support.live import ROOT, Stack, wait_until
from tests.support.platform_fixtures import SMALL_RUN
from tests.support.throwaway import Postgres, Redis
from workers.config import resolve
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.training.trainer import Trainer

pytestmark = [pytest.mark.timeout(900), pytest.mark.soak]
RUNS, STEPS, OUTAGE_S = 12, 60, 10
CONFIG = {**SMALL_RUN, "schedule": {"steps": STEPS, "minibatches": 1, "save_final": False, "checkpoint_every": 5},
          "eval": {"every": 30, "size": 8, "k": 2}}  # fmt: skip
MAKE_TOKEN = (
    "import django; django.setup(); from django.contrib.auth import get_user_model; "
    "from rolloutlab.accounts.models import ApiToken; "
    "u = get_user_model().objects.create_user('chaos', password='chaos-password'); print(ApiToken.issue(u, 'c')[1])"
)
FINAL = ("succeeded", "failed", "cancelled", "lost")


class ChaosStack(Stack):
    """The live stack with two workers: each kill takes one down, and a new one takes its place."""

    def start(self) -> ChaosStack:
        self.spawn_web()
        self.workers = []
        for _ in range(2):
            self.start_worker()
            self.workers.append(self.worker)
        self.wait_http()
        return self

    def kill_one_worker(self, rng: random.Random) -> None:
        """kill -9 a worker that is training (its process group busiest on the CPU), so that a run is cut short;
        a random one if neither is busy within 10 s."""
        victim = self.busiest_worker() or rng.choice(self.workers)
        self.workers.remove(victim)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        self.start_worker()
        self.workers.append(self.worker)

    def busiest_worker(self, seconds: float = 10.0):
        deadline = time.time() + seconds
        while time.time() < deadline:
            groups = {w: [p for p in psutil.process_iter() if safe_pgid(p) == w.pid] for w in self.workers}
            for processes in groups.values():
                for p in processes:
                    p.cpu_percent()  # the first call starts the measure
            time.sleep(0.5)
            load = {w: sum(safe_cpu(p) for p in processes) for w, processes in groups.items()}
            busiest = max(load, key=load.get)
            if load[busiest] > 50:  # a training child keeps a core busy
                return busiest
        return None

    def restart_web(self) -> None:
        self.kill_web()
        self.spawn_web()
        self.wait_http()

    def processes(self) -> list:
        return [*self.workers, self.web]


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    with Postgres() as pg, Redis() as rd:
        pg.migrate()
        env = {"DATABASE_URL": pg.url, "REDIS_URL": rd.url, "DJANGO_SETTINGS_MODULE": "rolloutlab.settings"}
        made = subprocess.run([sys.executable, "-c", MAKE_TOKEN], cwd=ROOT, env={**os.environ, **env},
                              check=True, capture_output=True, text=True)  # fmt: skip
        storage = tmp_path_factory.mktemp("storage")
        env = {"HEARTBEAT_INTERVAL_S": "1", "HEARTBEAT_TIMEOUT_S": "8", "STORAGE_ROOT": str(storage),
               "MAX_ACTIVE_RUNS_PER_USER": str(RUNS)}  # fmt: skip
        stack = ChaosStack(database_url=pg.url, redis_url=rd.url, name="chaos-", env=env)
        stack.start()
        stack.pg, stack.rd, stack.token = pg, rd, made.stdout.strip().splitlines()[-1]
        try:
            yield stack
        finally:
            stack.stop()


def safe_pgid(process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def safe_cpu(process) -> float:
    try:
        return process.cpu_percent()
    except psutil.Error:
        return 0.0


def query(pg, sql: str, *params):
    with psycopg.connect(pg.url.replace("postgres://", "postgresql://"), connect_timeout=3) as conn:
        return conn.execute(sql, params).fetchall()


def states(stack) -> dict[int, str]:
    return dict(query(stack.pg, "SELECT id, state FROM runs_run"))


def stored_stream(stack, run_id: int) -> dict[tuple[str, int], float | None]:
    rows = query(stack.pg, "SELECT k.name, p.step, p.value, count(*) OVER (PARTITION BY p.key_id, p.step) "
                           "FROM metrics_metricpoint p JOIN metrics_metrickey k ON k.id = p.key_id "
                           "WHERE p.run_id = %s", run_id)  # fmt: skip
    assert all(n == 1 for *_, n in rows), f"run {run_id}: a point stored twice"
    return {(name, step): value for name, step, value, _ in rows if is_deterministic_metric(name)}


def undisturbed_stream(seed: int) -> dict[tuple[str, int], float]:
    """The same config trained here, in-process, with nothing in the way: what the run must have stored."""
    reporter = MemoryReporter()
    assert Trainer(resolve({**CONFIG, "seed": seed}), reporter).run() == "succeeded"
    return {(name, row["step"]): value for row in reporter.metric_rows for name, value in row.items()
            if name != "step" and is_deterministic_metric(name)}  # fmt: skip


def fault_schedule(rng: random.Random) -> list[tuple[float, str]]:
    """Five faults at random moments of the first minute, at least 6 s apart (each has time to be felt)."""
    faults = ["kill a worker", "kill a worker", "restart Redis", "stop PostgreSQL for 10 s", "restart daphne"]
    rng.shuffle(faults)
    at, schedule = 0.0, []
    for fault in faults:
        at += rng.uniform(6, 14)
        schedule.append((round(at, 1), fault))
    return schedule


def inject(stack, fault: str, rng: random.Random) -> None:
    if fault == "kill a worker":
        stack.kill_one_worker(rng)
    elif fault == "restart Redis":
        stack.rd.stop()
        time.sleep(2)
        stack.rd.start()
    elif fault == "stop PostgreSQL for 10 s":
        stack.pg.stop()
        time.sleep(OUTAGE_S)
        stack.pg.start()
    elif fault == "restart daphne":
        stack.restart_web()


def open_page(chromium, stack, run_id: int):
    context = chromium.new_context(base_url=stack.url)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", "chaos")
    page.fill("input[name=password]", "chaos-password")
    page.click("#login-submit")
    page.wait_for_url("**/runs/")
    page.goto(f"/runs/{run_id}/")
    return page


def drawn_last_step(page) -> float:
    line = "(document.querySelector(\".chart[data-key='reward/mean']\")?.data ?? [{x: []}])[0].x"
    return page.evaluate(f"Math.max(-1, ...Array.from({line}))")


def test_twelve_runs_outlive_worker_kills_a_redis_restart_a_postgres_stop_and_a_daphne_restart(soak, chromium):
    seed = int(os.environ.get("CHAOS_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    schedule = fault_schedule(rng)
    print(f"\nchaos seed {seed}: {schedule}")
    began = time.time()
    ids = []
    for seed_of_run in range(RUNS):
        status, body = soak.api(soak.token, "POST", "/api/runs", {"config": {**CONFIG, "seed": seed_of_run},
                                                                  "name": f"chaos {seed_of_run}"})  # fmt: skip
        assert status == 201, body
        ids.append(body["id"])
    pages = [open_page(chromium, soak, ids[0]), open_page(chromium, soak, ids[-1])]  # the first and the last in line

    for at, fault in schedule:
        time.sleep(max(0.0, began + at - time.time()))
        started = time.time()
        inject(soak, fault, rng)
        print(f"  {time.time() - began:6.1f} s  {fault} ({time.time() - started:.1f} s)")

    wait_until(lambda: all(state in FINAL for state in states(soak).values()), 600, interval=1, what="every run's end")
    ended = time.time() - began
    assert states(soak) == {run_id: "succeeded" for run_id in ids}, states(soak)
    assert query(soak.pg, "SELECT count(*) FROM runs_run WHERE state IN ('queued', 'running')") == [(0,)]
    attempts = dict(query(soak.pg, "SELECT run_id, count(*) FROM runs_runattempt GROUP BY run_id"))

    for page, run_id in zip(pages, (ids[0], ids[-1])):  # the open pages caught up, through every outage
        wait_until(lambda page=page: drawn_last_step(page) == STEPS, 60, what=f"run {run_id}'s page to catch up")
        page.context.close()

    for seed_of_run, run_id in enumerate(ids):
        got, want = stored_stream(soak, run_id), undisturbed_stream(seed_of_run)
        assert got.keys() == want.keys(), (run_id, sorted(set(got) ^ set(want))[:5])
        differing = [key for key in want if not same(got[key], want[key])]
        assert not differing, (run_id, differing[:5], [(got[k], want[k]) for k in differing[:3]])
    assert not soak.server_errors()
    print(
        f"  every run succeeded after {ended:.0f} s; attempts per run {sorted(attempts.values())}; "
        f"checked against undisturbed runs in {time.time() - began - ended:.0f} s"
    )


def same(stored: float | None, reported: float) -> bool:
    """Bit-identical, a non-finite value stored as NULL."""
    return (stored is None and not math.isfinite(reported)) or stored == reported
