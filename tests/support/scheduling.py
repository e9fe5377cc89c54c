"""How `make test` spreads the suite over two pytest-xdist workers (`-n 2 --dist loadgroup --no-loadscope-reorder`).

Most of the suite's wall time is waiting, not computing: a live test waits on daphne, a Celery worker or
Chromium, and the tiny model's steps leave the second core idle; a second worker fills that time.

- A module runs whole on one worker, so its module fixtures (a browser, a throwaway PostgreSQL, a Ray
  cluster) are built once; every module marked `ray_cluster` runs on one worker, one after another (two
  local clusters at once would each hold both cores).
- Modules are handed out longest first, so that the many short ones fill the end instead of one long one
  running alone: `slow` modules, then the live tier, the database tier, the offline tier.

Without xdist (`make test-offline`, a single test) the order is the same and the groups are unused.
"""

from __future__ import annotations

import pytest

TIER_ORDER = {"live": 0, "database": 1, "offline": 2}


def group_of(item) -> str:
    return "ray-cluster" if item.get_closest_marker("ray_cluster") else item.module.__name__


def rank(item) -> tuple[int, int]:
    tier = item.nodeid.split("/")[1] if item.nodeid.startswith("tests/") else ""
    return (0 if item.get_closest_marker("slow") else 1, TIER_ORDER.get(tier, len(TIER_ORDER)))


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
    items.sort(key=rank)  # stable: a module's tests keep their order
