"""Cold page loads in headless Chromium: a run page with 10 metrics x 10,000 steps, and a compare page of 50 runs.

Fills a fresh database with 50 runs (two methods x 25 seeds; 10 metrics over 10,000 steps each, the run page's
default charts among them), serves it twice from the same database with daphne: from this checkout, and from a
git worktree of --baseline (the pages before issue 15's changes). For each page and server, --reps times: a new
browser context (nothing cached), log in, clear the HTTP cache, then load the page and time from navigation start
to the end of the first Plotly draw (the promise of the first Plotly.newPlot or Plotly.react resolves once its
`plotly_afterplot` has fired). Medians are reported. Targets: run page <= 1.0 s, compare page <= 1.5 s.

    python bench/page_load.py [--baseline be13ce2] [--reps 5]

MLflow's UI is not the peer: it draws its charts with another library and has no compare page of grouped
seeds, so "first chart drawn" means different work there. The peer is our own page before this issue.
Last line: {"bench": "page_load", "ours": s, "peer": s, "unit": "s", "ratio": ours/peer, ...both pages}
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _platform import REPO, free_port, make_run, setup_django, start_server

RUNS, STEPS = 50, 10_000
METRICS = [
    "reward/mean", "eval/pass@1", "policy/loss", "throughput/rollout_tokens_per_s", "reward/std", "policy/entropy",
    "policy/kl_ref", "completions/mean_length", "groups/frac_zero_std", "policy/grad_norm",
]  # fmt: skip
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]

# Resolves window.__firstPlot with the time of the first finished Plotly draw, wrapping Plotly when it is defined.
FIRST_PLOT = """
(() => {
  let plotly;
  window.__firstPlot = new Promise((resolve) => {
    const wrap = (fn) => function (...args) {
      const drawn = fn.apply(this, args);
      Promise.resolve(drawn).then(() => resolve(performance.now()));
      return drawn;
    };
    Object.defineProperty(window, "Plotly", {
      configurable: true,
      get: () => plotly,
      set: (value) => { plotly = value; value.newPlot = wrap(value.newPlot); value.react = wrap(value.react); },
    });
  });
})();
"""


def fill() -> tuple[int, list[int]]:
    """50 runs of 10 metrics x 10,000 steps; the first one's run page and the compare page of all of them."""
    from rolloutlab.metrics.ingest import write_columns
    from rolloutlab.runs.models import Run

    rng = np.random.default_rng(0)
    steps = np.arange(1, STEPS + 1)
    ids = []
    for i in range(RUNS):
        method = "grpo" if i % 2 else "mc-grpo"
        run = make_run(f"{method}-{i}", state="succeeded")
        Run.objects.filter(id=run.id).update(method=method, seed=i // 2, total_steps=STEPS, step=STEPS)
        names = [name for name in METRICS for _ in range(STEPS)] + ["counters/rollout_tokens"] * STEPS
        values = [np.cumsum(rng.normal(0.001, 0.01, STEPS)) for _ in METRICS] + [steps * 800.0]
        write_columns(run.id, names, np.tile(steps, len(METRICS) + 1), np.concatenate(values), np.zeros(len(names)))
        ids.append(run.id)
    return ids[0], ids


def serve(checkout: Path, env: dict, static_root: Path) -> tuple[subprocess.Popen, str]:
    """daphne from `checkout` on the bench database, its static files collected first (as a deployment does)."""
    env = {**os.environ, **env, "STATIC_ROOT": str(static_root), "PYTHONPATH": f"{checkout}:{checkout / 'platform'}"}
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], cwd=checkout, env=env, check=True)
    port = free_port()
    return start_server(env, port, checkout), f"http://127.0.0.1:{port}"


def cold_load(browser, url: str, path: str) -> float:
    """Seconds from navigation start to the first finished chart, with nothing in the browser's cache."""
    context = browser.new_context(base_url=url, viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", "bench")
    page.fill("input[name=password]", "bench-password")
    page.click("#login-submit")
    page.wait_for_load_state("networkidle")
    page.context.new_cdp_session(page).send("Network.clearBrowserCache")
    page.add_init_script(FIRST_PLOT)
    page.goto(path, wait_until="commit")
    drawn = page.evaluate("window.__firstPlot")
    context.close()
    return drawn / 1000  # performance.now() counts from the navigation's start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default="be13ce2", help="git ref of the pages to compare with")
    parser.add_argument("--reps", type=int, default=5)
    options = parser.parse_args()
    env = setup_django("rolloutlab_bench_pages")
    from django.contrib.auth import get_user_model
    from django.db import connection
    from playwright.sync_api import sync_playwright

    run_id, ids = fill()
    user = get_user_model().objects.get(username="bench")
    user.set_password("bench-password")
    user.save()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    pages = {"run page": f"/runs/{run_id}/", "compare page": f"/compare/?runs={','.join(map(str, ids))}"}
    work = Path(tempfile.mkdtemp(prefix="page-load-"))
    baseline = work / "baseline"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(baseline), options.baseline], cwd=REPO, check=True)
    servers = []
    try:
        servers = {"ours": serve(REPO, env, work / "static-ours"), "peer": serve(baseline, env, work / "static-peer")}
        seen = {(side, name): [] for side in servers for name in pages}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            for _ in range(options.reps):  # alternating, so a slow moment of the machine falls on both
                for name, path in pages.items():
                    for side, (_, url) in servers.items():
                        seen[side, name].append(cold_load(browser, url, path))
            browser.close()
    finally:
        for server, _ in servers.values() if servers else []:
            server.terminate()
            server.wait(timeout=15)
        subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=REPO, check=False)
        shutil.rmtree(work, ignore_errors=True)
    median = {key: statistics.median(values) for key, values in seen.items()}
    for (side, name), values in seen.items():
        print(f"{name}, {side}: median {median[side, name]:.3f} s ({', '.join(f'{v:.3f}' for v in values)})")
    ours, peer = median["ours", "run page"], median["peer", "run page"]
    compare = {"compare_ours": median["ours", "compare page"], "compare_peer": median["peer", "compare page"]}
    print(json.dumps({"bench": "page_load", "ours": ours, "peer": peer, "unit": "s", "ratio": ours / peer, **compare}))
    if ours > 1.0 or median["ours", "compare page"] > 1.5:
        sys.exit("over the targets: run page 1.0 s, compare page 1.5 s")


if __name__ == "__main__":
    main()
