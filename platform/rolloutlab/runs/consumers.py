"""The websocket of one run: /ws/runs/<id>/.

The consumer joins the run's group, then answers the client's resume message
with every point past the steps it already has (joining first means nothing
committed in between is missed; the client drops any point it already holds),
then forwards the group's events.

Client -> server: {"resume": {"reward/mean": 41, ...}}
Server -> client: {"kind": "points", "points": {key: [[step, value], ...]}}
                  {"kind": "state", "state": ..., "detail": ...}
                  {"kind": "progress", "step": ..., "total_steps": ..., "train_seconds": ...}
                  {"kind": "log", "lines": [...]}
                  a non-finite point is [step, null, "nan" | "+inf" | "-inf"]

While PostgreSQL or Redis is away the socket is accepted and closed at once with
code 4503 (UNAVAILABLE): a close before accepting would reach the browser as a
bare 1006. The client reconnects and resumes from the steps it holds.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from pydantic import Field, ValidationError

from rolloutlab import realtime
from rolloutlab.accounts.sharing import grant_for
from rolloutlab.inputs import MAX_ID, MAX_INT32, MetricName, Strict, field_errors
from rolloutlab.metrics.series import points_after
from rolloutlab.outages import SocketOutages, service_down
from rolloutlab.runs.access import can_see_run, get_run_for_user

UNAVAILABLE = SocketOutages.CLOSE_CODE  # a service is away: reconnect in a moment


class ClientMessage(Strict):
    """{"resume": {metric: last step held}}: what the client already has."""

    resume: dict[MetricName, Annotated[int, Field(ge=-1, le=MAX_INT32)]] = Field(max_length=500)


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def __call__(self, scope, receive, send):
        """Redis going away under an open socket ends the consumer's receive loop: close with 4503, not 1011."""
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            if not service_down(exc):
                raise
            await send({"type": "websocket.close", "code": UNAVAILABLE})

    async def connect(self):
        realtime.server_loop = asyncio.get_running_loop()
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        try:
            user = await self.share_grant() or self.scope.get("user")
            self.scope["user"] = user
            if not (self.run_id <= MAX_ID and user and user.is_authenticated and await self.run_visible(user)):
                await self.close(code=4403)
                return
            self.groups_joined = [realtime.run_group(self.run_id), realtime.access_group(user)]
            for group in self.groups_joined:  # the run's events, and word that its holder's access changed
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:
            await self.unavailable(exc)
            return
        self.checked_at = time.monotonic()
        await self.accept()

    async def unavailable(self, exc: Exception, accepted: bool = False) -> None:
        if not service_down(exc):
            raise exc
        if not accepted:
            await self.accept()
        await self.send_json({"kind": "unavailable", "error": f"the {service_down(exc)} is unavailable"})
        await self.close(code=UNAVAILABLE)

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", []):
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception as exc:  # Redis away: its group entries expire by themselves
                if not service_down(exc):
                    raise

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """A message that is not a resume of bounded size is answered with an error naming what is wrong."""
        try:
            message = ClientMessage.model_validate_json(text_data or bytes_data or b"")
        except ValidationError as exc:
            await self.send_json({"kind": "error", "error": "invalid message", "fields": field_errors(exc)})
            return
        try:
            points, state = await self.backlog(message.resume)
        except Exception as exc:
            await self.unavailable(exc, accepted=True)
            return
        await self.send_json(state)
        if points:
            await self.send_json({"kind": "points", "points": points})

    async def run_event(self, message):
        """The run's event, sent on while its holder may still see the run. Access is read again when the last check
        is SOCKET_ACCESS_RECHECK_S old: a share link that expired meanwhile, or a revocation whose word was lost
        (it is sent best effort), stops the stream within that time instead of never."""
        if time.monotonic() - self.checked_at >= settings.SOCKET_ACCESS_RECHECK_S:
            self.checked_at = time.monotonic()
            if not await self.still_allowed():
                await self.close_forbidden()
                return
        await self.send_json(message["event"])

    async def access_recheck(self, message):
        """The holder's access changed (its share link revoked, a membership removed): close if the run is gone."""
        self.checked_at = time.monotonic()
        if not await self.still_allowed():
            await self.close_forbidden()

    async def close_forbidden(self):
        await self.send_json({"kind": "closed", "error": "you may no longer see this run"})
        await self.close(code=4403)

    @database_sync_to_async
    def still_allowed(self) -> bool:
        user = self.scope["user"]
        if getattr(user, "link", None) is not None:  # a share link's holder: the link must still open
            user = grant_for(self.share_token)
            if user is None:
                return False
        return can_see_run(user, self.run_id)

    @database_sync_to_async
    def share_grant(self):
        """?share=<token>: a share link's holder watches the link's runs (None without one)."""
        token = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get("share", [""])[0]
        self.share_token = token[:500]
        return grant_for(self.share_token) if token else None

    @database_sync_to_async
    def run_visible(self, user) -> bool:
        return can_see_run(user, self.run_id)

    @database_sync_to_async
    def backlog(self, resume: dict[str, int]):
        run = get_run_for_user(self.scope["user"], self.run_id)
        state = {"kind": "state", "state": run.state, "detail": run.detail, "step": run.step}
        return points_after(self.run_id, resume), state
