"""Realtime notifications: one helper names a run's group, one sends to it.

Postgres is the truth: a message only carries what was just committed, and a
client that reconnects re-reads from the database.
"""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

# The embedded mode runs trainings in threads of the web process, and the in-memory
# channel layer only works inside the event loop of the websocket consumers; the
# first consumer to connect records that loop here.
server_loop: asyncio.AbstractEventLoop | None = None


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


def notify(run_id: int, event: dict) -> None:
    """Send an event to every websocket watching the run; never fails the caller."""
    layer = get_channel_layer()
    message = {"type": "run.event", "event": event}
    try:
        if isinstance(layer, InMemoryChannelLayer):
            if server_loop is not None and server_loop.is_running():
                asyncio.run_coroutine_threadsafe(layer.group_send(run_group(run_id), message), server_loop)
            return
        async_to_sync(layer.group_send)(run_group(run_id), message)
    except Exception:  # noqa: BLE001 - a notification is best effort; the database has the data
        import logging

        logging.getLogger(__name__).warning("could not notify run %s", run_id, exc_info=True)
