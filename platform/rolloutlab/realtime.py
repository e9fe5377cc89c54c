"""Realtime notifications: helpers name the groups (a run's, an access holder's), one sends to them.

Postgres is the truth: a message only carries what was just committed, and a
client that reconnects re-reads from the database.
"""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import async_to_sync
from celery.exceptions import SoftTimeLimitExceeded
from channels.layers import InMemoryChannelLayer, get_channel_layer

from rolloutlab import finite

log = logging.getLogger(__name__)
NOTIFY_CHUNK = 10_000  # points per websocket message: a bulk backfill must not become one huge message

# The embedded mode runs trainings in threads of the web process, and the in-memory
# channel layer only works inside the event loop of the websocket consumers; the
# first consumer to connect records that loop here.
server_loop: asyncio.AbstractEventLoop | None = None


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


def access_group(holder) -> str:
    """The group of every websocket one holder opened: a share link's (`share.<id>`) or a user's (`user.<id>`)."""
    link = getattr(holder, "link", None)  # a share link's holder (rolloutlab.accounts.sharing.ShareGrant)
    return f"share.{link.id}" if link is not None else f"user.{holder.id}"


def notify(run_id: int, event: dict) -> None:
    """Send an event to every websocket watching the run; never fails the caller."""
    send(run_group(run_id), {"type": "run.event", "event": event})


def recheck_access(group: str) -> None:
    """Ask every websocket of an access group to check that its holder may still see its run (a share link was
    revoked, a member removed): one that may not is closed."""
    send(group, {"type": "access.recheck"})


def send(group: str, message: dict) -> None:
    """group_send from sync code, best effort: the database is the truth, and a client that reconnects re-reads."""
    layer = get_channel_layer()
    try:
        if isinstance(layer, InMemoryChannelLayer):
            if server_loop is not None and server_loop.is_running():
                asyncio.run_coroutine_threadsafe(layer.group_send(group, message), server_loop)
            return
        async_to_sync(layer.group_send)(group, message)
    except SoftTimeLimitExceeded:  # the run's time limit struck while it waited here: the executor fails the run
        raise  # (swallowed, the hard limit would kill the worker's child, and the run would be re-queued)
    except Exception:  # noqa: BLE001 - a notification is best effort; the database has the data
        log.warning("could not notify %s", group, exc_info=True)


def publish_points(run_id: int, names, steps, values, progress: dict) -> None:
    """Announce points just committed (in chunks), then the run's progress: the worker's reporter and
    the external runs API both publish this way, so a browser cannot tell them apart."""
    for start in range(0, len(names), NOTIFY_CHUNK):
        points: dict[str, list] = {}
        for name, step, value in zip(names[start : start + NOTIFY_CHUNK], steps[start:], values[start:]):
            points.setdefault(name, []).append(finite.point(step, value))
        notify(run_id, {"kind": "points", "points": points})
    notify(run_id, {"kind": "progress", **progress})
