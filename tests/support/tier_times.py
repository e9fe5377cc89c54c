"""The time each test tier took, printed at the end of every pytest run (before the slowest tests).

The suite's budget is a wall time; the tiers say where it goes: tests/offline (no database), tests/database
(PostgreSQL in process), tests/live (daphne, Celery, Chromium, Ray).
"""

from __future__ import annotations

import pytest

SECONDS: dict[str, list[float]] = {}  # tier folder -> [seconds of setup, call and teardown; tests run]


def tier_of(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def pytest_runtest_logreport(report):
    tier = SECONDS.setdefault(tier_of(report.nodeid), [0.0, 0])
    tier[0] += report.duration
    tier[1] += report.when == "call"


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    if not SECONDS:
        return
    terminalreporter.section("time per tier (setup, call and teardown summed over the xdist workers)")
    for tier, (seconds, tests) in sorted(SECONDS.items(), key=lambda item: -item[1][0]):
        terminalreporter.write_line(f"{tier:<10} {seconds:7.1f} s  {tests} tests")
