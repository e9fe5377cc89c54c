"""The web process's watch over running runs: one whose worker stops heartbeating becomes lost."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger(__name__)
_started = threading.Event()


def start_monitor() -> None:
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=_watch, name="run-monitor", daemon=True).start()


def _watch() -> None:
    from rolloutlab.runs.services import mark_lost_runs

    stop = threading.Event()
    while not stop.wait(settings.HEARTBEAT_INTERVAL_S):
        try:
            close_old_connections()
            mark_lost_runs()
        except Exception:  # noqa: BLE001 - e.g. the database restarting; try again next round
            log.warning("run monitor round failed", exc_info=True)
