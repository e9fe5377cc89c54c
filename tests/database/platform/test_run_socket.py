"""The run websocket on the real Redis channel layer: resume from a step, then live events."""

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connections

from rolloutlab.metrics.ingest import write_points
from rolloutlab.realtime import notify, run_group
from rolloutlab.runs.models import Run
from rolloutlab.runs.routing import websocket_urlpatterns
from tests.conftest import project_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest_asyncio.fixture(autouse=True)
async def close_worker_thread_connections():
    """The consumer's queries run on asgiref's worker thread, which outlives the test: close its
    connections there, or they keep the test database open past the session."""
    yield
    await sync_to_async(connections.close_all)()


def make_run():
    user = get_user_model().objects.create_user("dave")
    project = project_of(user)
    return user, Run.objects.create(project=project, name="r", owner=user, config={}, config_hash="0" * 64)


async def connect(user, run_id):
    app = URLRouter(websocket_urlpatterns)
    communicator = WebsocketCommunicator(app, f"/ws/runs/{run_id}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    return communicator, connected


async def test_a_client_resumes_from_its_last_step_without_gap_or_duplicate():
    user, run = await sync_to_async(make_run)()
    rows = [("reward/mean", s, s / 10, 0.0) for s in range(5)] + [("loss", s, -s, 0.0) for s in range(3)]
    await sync_to_async(write_points)(run.id, rows)
    socket, connected = await connect(user, run.id)
    assert connected
    await socket.send_json_to({"resume": {"reward/mean": 2, "loss": -1}})
    state = await socket.receive_json_from(timeout=5)
    assert state == {"kind": "state", "state": "queued", "detail": "", "step": 0}
    backlog = await socket.receive_json_from(timeout=5)
    assert backlog == {
        "kind": "points",
        "points": {"reward/mean": [[3, 0.3], [4, 0.4]], "loss": [[0, 0], [1, -1], [2, -2]]},
    }
    await sync_to_async(notify)(run.id, {"kind": "points", "points": {"reward/mean": [[5, 0.5]]}})
    assert await socket.receive_json_from(timeout=5) == {"kind": "points", "points": {"reward/mean": [[5, 0.5]]}}
    await socket.disconnect()


async def test_an_anonymous_client_is_refused():
    from django.contrib.auth.models import AnonymousUser

    _, run = await sync_to_async(make_run)()
    socket, connected = await connect(AnonymousUser(), run.id)
    assert not connected
    # the refused consumer still listens on the channel layer until its socket is gone: end it here, or the
    # event loop's teardown waits on its blocking Redis read
    await socket.disconnect()


async def test_group_names_are_per_run():
    assert run_group(7) == "run.7" != run_group(8)
