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
"""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from rolloutlab.metrics import realtime
from rolloutlab.metrics.series import points_after
from rolloutlab.runs.models import Run


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        realtime.server_loop = asyncio.get_running_loop()
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        user = self.scope.get("user")
        if not (user and user.is_authenticated and await self.run_exists()):
            await self.close(code=4403)
            return
        self.group = realtime.run_group(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        resume = content.get("resume")
        if isinstance(resume, dict):
            points, state = await self.backlog({str(k): int(v) for k, v in resume.items()})
            await self.send_json(state)
            if points:
                await self.send_json({"kind": "points", "points": points})

    async def run_event(self, message):
        await self.send_json(message["event"])

    @database_sync_to_async
    def run_exists(self) -> bool:
        return Run.objects.filter(id=self.run_id).exists()

    @database_sync_to_async
    def backlog(self, resume: dict[str, int]):
        run = Run.objects.get(id=self.run_id)
        state = {"kind": "state", "state": run.state, "detail": run.detail, "step": run.step}
        return points_after(self.run_id, resume), state
