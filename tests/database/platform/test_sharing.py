"""Share links: a signed, expiring, revocable, read-only view of a run or a comparison."""

from __future__ import annotations

import io
import re
import zipfile
from datetime import timedelta

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import connections
from django.test import Client
from django.utils import timezone

from rolloutlab.accounts.models import Activity, Membership, Role, ShareLink
from rolloutlab.accounts.sharing import create_link
from rolloutlab.metrics.ingest import write_points
from rolloutlab.runs.models import Run
from rolloutlab.runs.routing import websocket_urlpatterns
from tests.conftest import project_of, small_config


@pytest_asyncio.fixture
async def sockets():
    """Opens in-process websockets to the run consumer: `await sockets(path, user)` -> (communicator, accepted).

    At the end every one is disconnected, also one the server closed: its consumer lives on until its client
    says it is gone, and left to the event loop's teardown (which cancels every task at once) the Redis receive
    under it can swallow the cancellation and wait forever. Then the worker thread's connections are closed."""
    opened: list[WebsocketCommunicator] = []

    async def open_socket(path: str, user=None) -> tuple[WebsocketCommunicator, bool]:
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
        communicator.scope["user"] = user or AnonymousUser()
        opened.append(communicator)
        accepted, _ = await communicator.connect()
        return communicator, accepted

    yield open_socket
    for communicator in opened:
        await communicator.disconnect()
    await sync_to_async(connections.close_all)()


def make_runs(owner, n=2, project="shared"):
    project = project_of(owner, project)
    runs = []
    for i in range(n):
        run = Run.objects.create(project=project, name=f"shared-run-{i}", owner=owner, method="grpo", state="succeeded",
                                 config=small_config().model_dump(mode="json"), config_hash="0" * 64)  # fmt: skip
        write_points(run.id, [("reward/mean", s, s / 10, 0.0) for s in range(3)])
        runs.append(run)
    return runs


def share_url(page: str) -> str:
    return re.search(r"(/share/[^/\s\"<]+/)", page).group(1)


@pytest.mark.django_db
def test_a_run_link_opens_its_page_read_only_to_anyone_and_nothing_else(alice_client, alice):
    run, other = make_runs(alice)
    response = alice_client.post(f"/runs/{run.id}/share/", {"days": "3"}, follow=True)
    url = share_url(response.content.decode())
    token = url.split("/")[2]
    stranger = Client()  # not logged in
    page = stranger.get(url)
    assert (
        page.status_code == 200
        and "shared-run-0" in page.content.decode()
        and 'id="shared-view"' in page.content.decode()
    )
    assert 'id="cancel-button"' not in page.content.decode()
    assert stranger.get(f"/api/runs/{run.id}/series?keys=reward/mean&share={token}").json()["series"]["reward/mean"]
    assert stranger.get(f"/api/runs/{other.id}/series?keys=reward/mean&share={token}").status_code == 404
    assert stranger.post(f"/api/runs/{run.id}/rerun?share={token}").status_code == 401  # reading only
    assert stranger.get(f"/runs/{run.id}/").status_code == 302  # the member's page still wants a login
    link = ShareLink.objects.get()
    assert link.last_used_at is not None and (link.expires_at - timezone.now()).days in (2, 3)
    assert Activity.objects.filter(action="shared").count() == 1


@pytest.mark.django_db
def test_a_revoked_expired_or_forged_link_opens_nothing(alice_client, alice):
    (run,) = make_runs(alice, 1)
    _, token = create_link(alice, "run", [run])
    stranger = Client()
    assert stranger.get(f"/share/{token}/").status_code == 200
    assert stranger.get(f"/share/{token[:-2]}xx/").status_code == 404  # the signature no longer matches
    link = ShareLink.objects.get()
    alice_client.post(f"/account/shares/{link.id}/revoke/")
    assert stranger.get(f"/share/{token}/").status_code == 404
    assert stranger.get(f"/api/runs/{run.id}?share={token}").status_code == 401
    _, fresh = create_link(alice, "run", [run])
    ShareLink.objects.filter(revoked_at__isnull=True).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert stranger.get(f"/share/{fresh}/").status_code == 404


@pytest.mark.django_db
def test_a_comparison_link_shows_its_runs_and_only_them(alice_client, alice):
    runs = make_runs(alice, 3)
    ids = ",".join(str(r.id) for r in runs[:2])
    response = alice_client.post(
        "/compare/share/", {"query": f"runs={ids}&metrics=reward/mean", "days": "7"}, follow=True
    )
    token = share_url(response.content.decode()).split("/")[2]
    stranger = Client()
    assert stranger.get(f"/share/{token}/").status_code == 200
    data = stranger.get(f"/api/compare?runs={ids}&metrics=reward/mean&share={token}")
    assert data.status_code == 200 and len(data.json()["groups"][0]["runs"]) == 2
    assert stranger.get(f"/api/compare?runs={ids},{runs[2].id}&share={token}").status_code == 404


@pytest.mark.django_db
def test_a_viewer_may_not_share_and_a_stranger_may_not_revoke(client, alice, bob):
    (run,) = make_runs(alice, 1)
    Membership.objects.create(team=run.project.team, user=bob, role=Role.VIEWER)
    client.force_login(bob)
    assert client.post(f"/runs/{run.id}/share/").status_code == 403
    link, _ = create_link(alice, "run", [run])
    assert client.post(f"/account/shares/{link.id}/revoke/").status_code == 403  # not its creator, not an admin
    Membership.objects.filter(user=bob).delete()
    assert client.post(f"/account/shares/{link.id}/revoke/").status_code == 404  # not even of the team now


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_websocket_of_a_shared_run_opens_with_its_token_only(django_user_model, sockets):
    alice = await sync_to_async(django_user_model.objects.create_user)("alice")
    run, other = await sync_to_async(make_runs)(alice)
    _, token = await sync_to_async(create_link)(alice, "run", [run])
    for run_id, allowed in ((run.id, True), (other.id, False)):
        _, accepted = await sockets(f"/ws/runs/{run_id}/?share={token}")
        assert accepted is allowed


@pytest.mark.django_db
def test_a_share_link_reads_the_audit_record_without_the_uncommitted_diff(alice_client, alice):
    from rolloutlab.audit.models import AuditRecord

    (run,) = make_runs(alice, 1)
    planted = "+API_KEY = 'zq8-not-a-pattern-anyone-knows-7f3'"
    code = {"dirty": True, "diff": f"--- a/x.py\n{planted}\n", "diff_sha256": "ab" * 32}
    AuditRecord.objects.create(run=run, record={"code": code, "seed": 0})
    _, token = create_link(alice, "run", [run])
    shared = Client().get(f"/api/runs/{run.id}/audit?share={token}").json()["record"]["code"]
    assert planted not in shared["diff"] and "withheld" in shared["diff"]
    assert shared["diff_sha256"] == "ab" * 32 and shared["dirty"] is True  # what it was, still said
    assert planted in alice_client.get(f"/api/runs/{run.id}/audit").json()["record"]["code"]["diff"]  # a member
    # nor in the run's bundle, which a share link's holder may download too
    bundled = zipfile.ZipFile(io.BytesIO(Client().get(f"/api/runs/{run.id}/bundle?share={token}").content))
    assert planted.encode() not in b"".join(bundled.read(name) for name in bundled.namelist())
    members = zipfile.ZipFile(io.BytesIO(alice_client.get(f"/api/runs/{run.id}/bundle").content))
    assert planted.encode() in b"".join(members.read(name) for name in members.namelist())


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_revoking_a_link_closes_its_open_websocket_and_leaves_a_members_open(django_user_model, sockets):
    from rolloutlab.accounts.sharing import revoke

    alice = await sync_to_async(django_user_model.objects.create_user)("alice")
    (run,) = await sync_to_async(make_runs)(alice, 1)
    link, token = await sync_to_async(create_link)(alice, "run", [run])
    shared, shared_accepted = await sockets(f"/ws/runs/{run.id}/?share={token}")
    member, member_accepted = await sockets(f"/ws/runs/{run.id}/", alice)
    assert shared_accepted and member_accepted
    await sync_to_async(revoke)(alice, link.id)
    assert (await shared.receive_json_from(timeout=5))["kind"] == "closed"
    assert (await shared.receive_output(timeout=5))["code"] == 4403
    assert await member.receive_nothing(timeout=0.5)  # the member's socket is untouched


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_removing_a_member_closes_their_open_websockets_of_the_teams_runs(django_user_model, sockets):
    from rolloutlab.accounts.access import home_team
    from rolloutlab.accounts.services import remove_member

    alice = await sync_to_async(django_user_model.objects.create_user)("alice")
    bob = await sync_to_async(django_user_model.objects.create_user)("bob")
    (run,) = await sync_to_async(make_runs)(alice, 1)
    team = await sync_to_async(home_team)(alice)
    membership = await sync_to_async(Membership.objects.create)(team=team, user=bob, role=Role.VIEWER)
    socket, accepted = await sockets(f"/ws/runs/{run.id}/", bob)
    assert accepted
    await sync_to_async(remove_member)(alice, team, membership.id)
    assert (await socket.receive_json_from(timeout=5))["kind"] == "closed"
    assert (await socket.receive_output(timeout=5))["code"] == 4403


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_socket_whose_access_ended_without_word_stops_streaming_at_its_next_event(
    django_user_model, sockets, settings
):
    """A link that expired while its socket was open, a membership removed without the recheck message (it is
    sent best effort): the next event past the recheck interval closes the socket instead of streaming on."""
    from rolloutlab import realtime
    from rolloutlab.accounts.access import home_team

    settings.SOCKET_ACCESS_RECHECK_S = 0
    alice = await sync_to_async(django_user_model.objects.create_user)("alice")
    bob = await sync_to_async(django_user_model.objects.create_user)("bob")
    (run,) = await sync_to_async(make_runs)(alice, 1)
    link, token = await sync_to_async(create_link)(alice, "run", [run])
    team = await sync_to_async(home_team)(alice)
    await sync_to_async(Membership.objects.create)(team=team, user=bob, role=Role.VIEWER)
    shared, _ = await sockets(f"/ws/runs/{run.id}/?share={token}")
    member, _ = await sockets(f"/ws/runs/{run.id}/", bob)
    owner, _ = await sockets(f"/ws/runs/{run.id}/", alice)
    await sync_to_async(realtime.notify)(run.id, {"kind": "log", "lines": ["before"]})
    for socket in (shared, member, owner):
        assert (await socket.receive_json_from(timeout=5))["lines"] == ["before"]
    past = timezone.now() - timedelta(seconds=1)
    await sync_to_async(ShareLink.objects.filter(id=link.id).update)(expires_at=past)  # no revocation, no word
    await sync_to_async(Membership.objects.filter(user=bob).delete)()  # as if the recheck message were lost
    await sync_to_async(realtime.notify)(run.id, {"kind": "log", "lines": ["after"]})
    for socket in (shared, member):
        assert (await socket.receive_json_from(timeout=5))["kind"] == "closed"
        assert (await socket.receive_output(timeout=5))["code"] == 4403
    assert (await owner.receive_json_from(timeout=5))["lines"] == ["after"]  # who may still see it, still sees it
