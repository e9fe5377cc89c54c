"""Screenshots of every view, for docs/tour.md and the README, taken from a demo run so they stay current.

    .venv/bin/python docs/make_tour.py          # a few minutes: two example runs of the tiny model

Serves the embedded platform (SQLite, runs in process: `manage.py demo --examples`) from a temporary directory,
waits for its two example runs (grpo and mc-grpo on the quick arithmetic example) to finish, then opens each view
in headless Chromium and writes docs/tour/*.png and docs/screenshot.png.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "tour"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_demo(workdir: Path) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    env.update(SQLITE_PATH=str(workdir / "db.sqlite3"), STORAGE_ROOT=str(workdir / "storage"), PYTHONUNBUFFERED="1",
               STATIC_ROOT=str(workdir / "static"))  # fmt: skip
    port = free_port()
    command = [sys.executable, "manage.py", "demo", "--examples", "--port", str(port)]
    log = open(workdir / "demo.log", "wb")
    server = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{url}/login/", timeout=1)
            return server, url
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the demo did not start; see {workdir / 'demo.log'}")


def finished_runs(page) -> list[dict]:
    """The demo's runs once both are final (their page's API), waiting up to 15 minutes."""
    deadline = time.time() + 900
    while time.time() < deadline:
        runs = page.request.get("/api/runs").json()
        runs = runs["runs"]
        if len(runs) >= 2 and all(r["state"] in ("succeeded", "failed", "cancelled", "lost") for r in runs):
            return sorted(runs, key=lambda r: r["id"])
        time.sleep(3)
    raise RuntimeError("the example runs did not finish within 15 minutes")


def shoot(page, name: str, selector: str | None = None) -> None:
    target = page.locator(selector).first if selector else page
    target.screenshot(path=str(OUT / f"{name}.png"), **({} if selector else {"full_page": False}))
    print(f"docs/tour/{name}.png")


def tour(page, runs: list[dict]) -> None:
    grpo = runs[0]["id"]
    page.goto("/runs/")
    page.wait_for_load_state("networkidle")
    shoot(page, "runs")
    page.goto(f"/runs/{grpo}/")
    page.wait_for_function("document.querySelectorAll('.chart .main-svg').length >= 2")
    page.wait_for_timeout(500)
    shoot(page, "run")
    page.screenshot(path=str(REPO / "docs" / "screenshot.png"))
    page.wait_for_function("document.getElementById('run').dataset.rolloutPrompts !== undefined")
    page.wait_for_timeout(500)
    shoot(page, "rollouts", ".charts.rollouts")
    page.select_option("#token-colour", "logprob")
    page.wait_for_selector("#sample-groups .token")
    shoot(page, "samples", "#sample-groups .sample-group")
    page.goto(f"/compare/?runs={','.join(str(r['id']) for r in runs)}")
    page.wait_for_function("document.querySelectorAll('.main-svg').length >= 1")
    page.wait_for_timeout(800)
    shoot(page, "compare")
    page.goto("/runs/launch/?method=dapo")
    page.wait_for_load_state("networkidle")
    shoot(page, "launch")
    page.click("#mode-toggle")
    page.wait_for_selector("#config-yaml", state="visible")
    shoot(page, "launch-yaml")


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tour-") as work:
        server, url = start_demo(Path(work))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
                page = browser.new_context(base_url=url, viewport={"width": 1440, "height": 900}).new_page()
                page.goto("/login/")
                page.fill("input[name=username]", "demo")
                page.fill("input[name=password]", "demo")
                page.click("#login-submit")
                page.wait_for_url("**/runs/")
                tour(page, finished_runs(page))
                browser.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
