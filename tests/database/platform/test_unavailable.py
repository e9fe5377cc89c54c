"""A service away is a 503 with a message, on pages, the API and the run socket; never a 500.

The outages are real: the database settings point at a port where nothing listens
(a fresh connection is refused, as while PostgreSQL restarts), or the broker URL does.
The live version, with a real PostgreSQL and Redis stopped mid-run, is test_outages.py.
"""

import json
from contextlib import contextmanager

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection

from rolloutlab.accounts.models import ApiToken
from rolloutlab.runs.consumers import UNAVAILABLE
from rolloutlab.runs.models import Run
from rolloutlab.runs.routing import websocket_urlpatterns
from tests.forms import form_values
from tests.support.platform_fixtures import SMALL_RUN

pytestmark = pytest.mark.django_db(transaction=True)  # the tests close the connection


@contextmanager
def database_down():
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port


@pytest.fixture
def token(alice):
    return ApiToken.issue(alice, "tests")[1]


def test_a_page_answers_503_with_a_message_while_the_database_is_down(alice_client):
    with database_down():
        response = alice_client.get("/runs/")
    assert response.status_code == 503 and response["Retry-After"]
    assert b"database (PostgreSQL) is unavailable" in response.content and b"<html" in response.content


def test_the_api_answers_503_json_while_the_database_is_down(client, token):
    with database_down():
        response = client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 503
    body = response.json()
    assert set(body) == {"error", "fields"} and "database" in body["error"] and body["fields"] == {}


def test_a_launch_while_the_broker_is_down_is_refused_with_503_and_records_nothing(client, token, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = client.post("/api/runs", data=json.dumps({"config": SMALL_RUN}), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip
    assert response.status_code == 503
    assert "message broker (Redis)" in response.json()["error"]
    assert not Run.objects.exists()


def test_the_launch_page_answers_503_while_the_broker_is_down(alice_client, settings):
    form = form_values(alice_client.get("/runs/launch/").content.decode())  # as the browser would submit it
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = alice_client.post("/runs/launch/", form)
    assert response.status_code == 503 and b"message broker (Redis) is unavailable" in response.content
    assert not Run.objects.exists()


@pytest.mark.asyncio
async def test_the_run_socket_closes_with_4503_while_the_database_is_down(alice):
    from asgiref.sync import sync_to_async

    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/runs/1/")
    communicator.scope["user"] = alice

    @sync_to_async(thread_sensitive=True)
    def break_database():
        connection.close()
        connection.settings_dict["PORT"] = "1"

    @sync_to_async(thread_sensitive=True)
    def mend_database(port):
        connection.close()
        connection.settings_dict["PORT"] = port

    port = connection.settings_dict["PORT"]
    await break_database()
    try:
        connected, _ = await communicator.connect()
        assert connected  # accepted only to say why it closes: a refused handshake would be a bare 1006
        message = await communicator.receive_json_from(timeout=5)
        assert message["kind"] == "unavailable" and "database" in message["error"]
        closed = await communicator.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": UNAVAILABLE}
    finally:
        await mend_database(port)
        await communicator.disconnect()


@pytest.mark.asyncio
async def test_a_socket_whose_session_cannot_be_read_closes_with_4503_too(alice):
    """Channels reads the session before any consumer runs: the outage is met there first."""
    from asgiref.sync import sync_to_async
    from channels.auth import AuthMiddlewareStack

    from rolloutlab.outages import SocketOutages

    app = SocketOutages(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
    communicator = WebsocketCommunicator(app, "/ws/runs/1/", headers=[(b"cookie", b"sessionid=" + b"a" * 32)])
    port = connection.settings_dict["PORT"]

    @sync_to_async(thread_sensitive=True)
    def point_database_at(where):
        connection.close()
        connection.settings_dict["PORT"] = where

    await point_database_at("1")
    try:
        connected, _ = await communicator.connect()
        assert connected
        assert await communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": UNAVAILABLE}
    finally:
        await point_database_at(port)
        await communicator.disconnect()
