"""The web process's watch over running runs: one whose worker stops heartbeating becomes lost.

A round that fails (the database restarting) makes the monitor blind, and the
workers could not heartbeat either: their last beats are stale through no fault
of theirs. So after a failed round no run is declared lost until HEARTBEAT_TIMEOUT_S
after the first round that works again, time for every live worker to beat.
Each round also re-sends the wake-up of any queued run whose message never reached
the broker (rolloutlab.execution.dispatch.resend_unsent), or that the broker no longer holds
(resend_lost): the database, not the broker, says which runs wait.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections

from rolloutlab.execution.dispatch import resend_lost, resend_unsent
from rolloutlab.execution.lifecycle import mark_lost_runs
from rolloutlab.outages import BROKER, service_down

log = logging.getLogger(__name__)
_started = threading.Event()


class Watch:
    """One round at a time; `round()` returns the runs it declared lost."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.grace_until = 0.0  # no run is declared lost before this time (clock seconds)
        self.failed = False

    def round(self) -> list[int]:
        try:
            close_old_connections()
            if self.failed:  # the first round that works after an outage: the workers get their time
                self.failed = False
                self.grace_until = self.clock() + settings.HEARTBEAT_TIMEOUT_S
                log.warning("run monitor back; no run is declared lost for %s s", settings.HEARTBEAT_TIMEOUT_S)
            self.resend()
            if self.clock() < self.grace_until:
                return []
            return mark_lost_runs()
        except Exception:  # noqa: BLE001 - e.g. the database restarting; try again next round
            self.failed = True
            log.warning("run monitor round failed", exc_info=True)
            return []

    @staticmethod
    def resend() -> None:
        try:
            sent, lost = resend_unsent(), resend_lost()
        except Exception as exc:
            if service_down(exc) != BROKER:
                raise
            return  # the broker is still away: next round
        if sent:
            log.warning("re-sent the wake-up of queued runs %s", sent)
        if lost:
            log.warning("the broker no longer held the wake-up of queued runs %s: sent again", lost)


def start_monitor() -> None:
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=_watch, name="run-monitor", daemon=True).start()


def _watch() -> None:
    stop, watch = threading.Event(), Watch()
    while not stop.wait(settings.HEARTBEAT_INTERVAL_S):
        watch.round()
