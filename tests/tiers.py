"""`make test`: the three tiers in two concurrent pytest sessions, and one verdict.

    python -m tests.tiers                  # offline beside database + live; exit 1 if either failed
    python -m tests.tiers offline live     # only these tiers (a make target per tier calls pytest directly)

Why two sessions: tests/offline is torch on the CPU, tests/live mostly waits (a websocket held for a minute,
heartbeats timing out, a browser), so on a 2-core machine the one fills the other's waits. The database and
live tiers share a session because they share the test database, Redis and the live stack; offline uses none
of them, so the two sessions never touch the same state (the model cache is written atomically).

Each session's output goes to .cache/tests/<session>.log and is printed whole once the session ends (the
quicker first), then one line per session: its result, its wall time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / ".cache" / "tests"
SESSIONS = {"offline": ["tests/offline"], "platform": ["tests/database", "tests/live"]}


@dataclass
class Session:
    name: str
    process: subprocess.Popen
    log: Path
    started: float
    seconds: float = 0.0


def start(name: str, paths: list[str]) -> Session:
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{name}.log"
    command = [sys.executable, "-m", "pytest", "-q", *paths]
    process = subprocess.Popen(command, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return Session(name, process, log, time.monotonic())


def wait_for_each(sessions: list[Session]) -> list[Session]:
    """The sessions in the order they end, each printed as it ends."""
    pending, ended = list(sessions), []
    while pending:
        for session in [s for s in pending if s.process.poll() is not None]:
            session.seconds = time.monotonic() - session.started
            print(f"\n===== {session.name}: {' '.join(session.process.args[3:])} =====", flush=True)
            sys.stdout.write(session.log.read_text())
            pending.remove(session)
            ended.append(session)
        time.sleep(1)
    return ended


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def main(tiers: list[str]) -> int:
    chosen = {name: [p for p in paths if not tiers or p.split("/")[1] in tiers] for name, paths in SESSIONS.items()}
    began = time.monotonic()
    ended = wait_for_each([start(name, paths) for name, paths in chosen.items() if paths])
    print(f"\n===== make test: {time.monotonic() - began:.0f} s wall =====")
    for session in ended:
        verdict = "passed" if session.process.returncode == 0 else f"FAILED (exit {session.process.returncode})"
        print(f"{session.name:<9} {verdict:<18} {session.seconds:6.0f} s   {last_line(session.log)}")
    return 0 if all(s.process.returncode == 0 for s in ended) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
