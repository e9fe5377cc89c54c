"""Live latency: from the worker's report of a metric to its receipt by a browser's websocket.

A daphne server (Redis channel layer, PostgreSQL) serves one run; 20 websocket
clients watch it; a reporter in this process (standing in for the worker, the
platform's real PlatformReporter) reports 20 steps a second for 15 seconds.
Each client stamps each point when it arrives; latency is arrival minus report
time (one machine, one clock). The peer is a dashboard that polls the same
run's series once a second, measured the same way. Target: p95 <= 250 ms.

    python bench/live_latency.py

Last line: {"bench": "live_latency", "ours": p95 ms, "peer": p95 ms, "unit": "ms", "ratio": ours/peer}
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
import urllib.request

import numpy as np
from _platform import free_port, make_run, setup_django, start_server

CLIENTS, STEPS, STEP_S = 20, 300, 0.05


async def watch(url: str, cookie: str, origin: str, arrivals: list, ready: asyncio.Event, done: asyncio.Event):
    import websockets

    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin}) as ws:
        await ws.send(json.dumps({"resume": {"live/value": STEPS}}))  # nothing old: only what comes next
        ready.set()
        while not done.is_set():
            try:
                message = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
            except TimeoutError:
                continue
            now = time.time()
            for step, _ in message.get("points", {}).get("live/value", []):
                arrivals.append((step, now))


def poll(url: str, cookie: str, arrivals: list, stop: threading.Event) -> None:
    seen = -1
    while not stop.is_set():
        request = urllib.request.Request(url, headers={"Cookie": cookie})
        series = json.loads(urllib.request.urlopen(request, timeout=5).read())["series"].get("live/value", {})
        now = time.time()
        for step in series.get("step", []):
            if step > seen:
                arrivals.append((step, now))
                seen = step
        stop.wait(1.0)


def report(run_id: int, reported: dict) -> None:
    from rolloutlab.execution.reporter import PlatformReporter

    reporter = PlatformReporter(run_id)
    for step in range(STEPS):
        reported[step] = time.time()
        reporter.metrics(step, {"live/value": float(step), "live/other": 1.0})
        time.sleep(STEP_S)
    reporter.close()


def latencies(arrivals: list, reported: dict) -> np.ndarray:
    return np.array([(at - reported[step]) * 1000 for step, at in arrivals if step in reported])


def main() -> None:
    env = setup_django("rolloutlab_bench_live")
    from django.test import Client

    run = make_run("live")
    client = Client()
    client.force_login(run.owner)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    port = free_port()
    server = start_server(env, port)
    try:
        arrivals, polled, reported = [], [], {}
        stop_polling = threading.Event()
        series_url = f"http://127.0.0.1:{port}/api/runs/{run.id}/series?keys=live/value&points=5000"
        poller = threading.Thread(target=poll, args=(series_url, cookie, polled, stop_polling))

        async def scenario():
            ready = [asyncio.Event() for _ in range(CLIENTS)]
            done = asyncio.Event()
            url, origin = f"ws://127.0.0.1:{port}/ws/runs/{run.id}/", f"http://127.0.0.1:{port}"
            clients = [asyncio.create_task(watch(url, cookie, origin, arrivals, r, done)) for r in ready]
            await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 30)
            poller.start()
            await asyncio.to_thread(report, run.id, reported)
            await asyncio.sleep(1.5)  # the last flush and the last poll
            done.set()
            await asyncio.gather(*clients)

        asyncio.run(scenario())
        stop_polling.set()
        poller.join()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
    ours, peer = latencies(arrivals, reported), latencies(polled, reported)
    expected = CLIENTS * STEPS
    print(f"{CLIENTS} clients received {len(ours)} of {expected} points; latency ms: "
          f"median {np.median(ours):.0f}, p95 {np.percentile(ours, 95):.0f}, max {ours.max():.0f}. "
          f"Polling once a second: median {np.median(peer):.0f}, p95 {np.percentile(peer, 95):.0f}")  # fmt: skip
    p95, peer95 = float(np.percentile(ours, 95)), float(np.percentile(peer, 95))
    print(json.dumps({"bench": "live_latency", "ours": p95, "peer": peer95, "unit": "ms", "ratio": p95 / peer95}))
    if len(ours) != expected:
        sys.exit("some points never reached some clients")


if __name__ == "__main__":
    main()
