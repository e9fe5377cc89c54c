"""How `make test` spreads the suite over three pytest-xdist workers (`-n 3 --dist loadgroup --no-loadscope-reorder`).

Most of the suite's wall time is waiting, not computing: a live test waits on daphne, a Celery worker or
Chromium, and the tiny model's steps leave a core idle; more workers than cores fill that time (on this
2-core machine: one process 29:40, two workers 20:01, three 15:20).

- A module runs whole on one worker, so its module fixtures (a browser, a throwaway PostgreSQL, a Ray
  cluster) are built once.
- Every module marked `both_cores` (a local Ray cluster, a 200-step training) runs on one worker, one after
  another: each keeps both cores busy for minutes with torch's threads, and two at once beside a third
  worker slowed each down threefold (torch's parallel regions wait for their threads to be scheduled).
- Modules are handed out longest first, so that the many short ones fill the end instead of one long one
  running alone: `slow` modules, then the live tier, the database tier, the offline tier.

Without xdist (`make test-offline`, a single test) the order is the same and the groups are unused.
"""

from __future__ import annotations

import pytest

TIER_ORDER = {"live": 0, "database": 1, "offline": 2}


def group_of(item) -> str:
    return "both-cores" if item.get_closest_marker("both_cores") else item.module.__name__


def rank(item) -> tuple[int, int]:
    tier = item.nodeid.split("/")[1] if item.nodeid.startswith("tests/") else ""
    return (0 if item.get_closest_marker("slow") else 1, TIER_ORDER.get(tier, len(TIER_ORDER)))


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
    items.sort(key=rank)  # stable: a module's tests keep their order
