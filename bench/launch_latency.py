"""Launch latency: from a client's POST /api/runs to the answer, while other clients launch too.

A daphne server (PostgreSQL, Redis as Celery's broker, the team deployment's set-up)
takes launches from 8 clients at once, 240 in all, each a small but complete RunConfig
over the API with a token. A launch validates the config, records the queued run,
writes the activity line and sends the Celery task by name; nothing trains here (no
worker consumes the queue), so the figure is the web side's own cost. The first launch
on a freshly started server is timed apart: that is where a config validation that
imported the worker's code (torch) used to cost seconds.

The peer is the floor of any launch that queues work: the same Celery task sent
straight to the same broker with `send_task` from 8 threads, with no web request, no
validation and no database row. Target: p95 well under 1 s.

    python bench/launch_latency.py

Last line: {"bench": "launch_latency", "ours": p95 ms, "peer": p95 ms, "unit": "ms", "ratio": ours/peer}
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from _platform import free_port, setup_django, start_server

CLIENTS, LAUNCHES = 8, 240
BROKER = "redis://127.0.0.1:6379/9"  # a Redis database of its own: no worker listens there
QUEUE = "cpu"  # where a CPU run's task goes; emptied before and after
CONFIG = {
    "method": "grpo",
    "model": {"hidden_size": 32, "layers": 2, "heads": 2},
    "task": {"name": "arith", "digits": 1},
    "rollout": {"group_size": 4, "prompts_per_step": 4, "max_new_tokens": 4},
    "schedule": {"steps": 3},
}


def launch(url: str, token: str, seed: int) -> float:
    body = json.dumps({"config": {**CONFIG, "seed": seed}, "project": "bench"}).encode()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()
        if answer.status != 201:
            raise RuntimeError(f"launch answered {answer.status}")
    return (time.perf_counter() - started) * 1000


def our_latencies(url: str, token: str) -> tuple[float, np.ndarray]:
    cold = launch(url, token, seed=0)
    with ThreadPoolExecutor(CLIENTS) as pool:
        warm = list(pool.map(lambda seed: launch(url, token, seed), range(1, LAUNCHES + 1)))
    return cold, np.array(warm)


def peer_latencies() -> np.ndarray:
    from celery import Celery

    app = Celery("peer", broker=BROKER)

    def send(run_id: int) -> float:
        started = time.perf_counter()
        app.send_task("runs.execute_run", args=[run_id], queue=QUEUE)
        return (time.perf_counter() - started) * 1000

    send(0)  # the broker connection, as a long-lived launcher would hold it
    with ThreadPoolExecutor(CLIENTS) as pool:
        return np.array(list(pool.map(send, range(1, LAUNCHES + 1))))


def empty_queue() -> None:
    import redis

    redis.Redis.from_url(BROKER).delete(QUEUE)


def main() -> None:
    env = setup_django("rolloutlab_bench_launch")
    env.update({"REDIS_URL": BROKER, "RUN_EXECUTOR": "celery", "MAX_ACTIVE_RUNS_PER_USER": str(LAUNCHES + 10)})
    empty_queue()
    from django.contrib.auth import get_user_model

    from rolloutlab.accounts.services import issue_token
    from rolloutlab.runs.access import project_for_launch

    user = get_user_model().objects.create_user("bench")
    project_for_launch(user, "bench")
    _, token = issue_token(user, "bench", days=1)
    port = free_port()
    server = start_server(env, port)
    try:
        cold, ours = our_latencies(f"http://127.0.0.1:{port}/api/runs", token)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)
    peer = peer_latencies()
    empty_queue()
    p = {name: np.percentile(values, [50, 95]) for name, values in (("ours", ours), ("peer", peer))}
    print(f"first launch on a fresh server: {cold:.0f} ms")
    print(f"ours: {LAUNCHES} launches, {CLIENTS} clients: p50 {p['ours'][0]:.0f} ms, p95 {p['ours'][1]:.0f} ms")
    print(f"peer (bare send_task): p50 {p['peer'][0]:.1f} ms, p95 {p['peer'][1]:.1f} ms")
    ratio = p["ours"][1] / p["peer"][1]
    print(json.dumps({"bench": "launch_latency", "ours": round(p["ours"][1], 1), "peer": round(p["peer"][1], 2),
                      "unit": "ms", "ratio": round(ratio, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
