"""Teams see only their own: every route of the URL conf and every websocket route, walked from the routing.

A route with an object in its path (run_id, experiment_id, ...) is covered as soon as it
exists: the walk fills in team B's object and expects 404 for alice of team A on every
method the route answers. A route that names objects in its query, or lists them, or
touches none, must be classified below; a new route that is none of these fails the walk,
so it cannot be forgotten. Viewers get 403 on every state change.
"""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.urls import URLPattern, URLResolver, get_resolver

from rolloutlab.accounts.models import ApiToken, Membership, Role, Team
from rolloutlab.accounts.sharing import create_link
from rolloutlab.alerts.models import AlertRule
from rolloutlab.audit.models import AuditRecord
from rolloutlab.metrics.ingest import write_points
from rolloutlab.runs.models import Experiment, Project, Run, Sample
from rolloutlab.runs.routing import websocket_urlpatterns
from tests.conftest import small_config

SKIPPED = ("admin/",)  # Django's own admin: staff only, not the product's pages
# routes naming objects in their query: {url name: query with {run}, {run2}, {experiment} filled in}
QUERY_OBJECTS = {
    "runs:launch": "from={run}",
    "compare:page": "runs={run}",
    "compare:index": "project={project_id}",
    "compare:sweep": "from={run}",
    "audit:differences": "a={run}&b={run2}",
    "api:compare": "runs={run}",
    "api:compare_export": "runs={run}",
    "api:differences": "a={run}&b={run2}",
}
EXPERIMENT_QUERIES = {"compare:page": "experiment={experiment}", "api:compare": "experiment={experiment}"}
LISTS = {"runs:list", "api:runs", "accounts:teams", "accounts:tokens", "compare:index"}  # 200, only the caller's
PERSONAL = {"accounts:revoke-token"}
# opened by the token in their path by whoever holds it, by design (tests/database/platform/test_sharing.py)
PUBLIC_BY_TOKEN = {"share"}  # a user's own objects: 404 to everyone else, teammates included
FREE = {  # touch no existing object (launch/import make new ones in the caller's own team)
    None, "login", "logout", "runs:method-card", "audit:import", "api:schema", "api:import_bundle",
    "compare:share",  # posts a comparison's query: its runs are loaded as compare:page loads them
    "api:openapi-json", "api:openapi-view", "api:api-root",
    "api:external_runs",  # starts an external run in the caller's own team, as a launch does
    "runs:launch-warnings",  # reads a config from the form it is posted with, nothing stored
    "runs:launch-yaml", "runs:launch-check",  # likewise: the YAML editor
    # the runs table: saved views are the caller's own, looked up by user; a bulk order names its runs in
    # its JSON body, each scoped as a run's route scopes it (another team's: a 404, test_runs_table.py)
    "api:views", "api:save_view", "api:delete_view", "api:bulk",
}  # fmt: skip
STATE_CHANGES = ("POST", "DELETE")


def walk(patterns=None, prefix=""):
    """(route, url name) of every endpoint, with namespaces joined as reverse() spells them."""
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if not route.startswith(SKIPPED):
                namespace = entry.namespace
                for sub_route, name in walk(entry.url_patterns, route):
                    yield sub_route, (f"{namespace}:{name}" if namespace and name else name)
        elif isinstance(entry, URLPattern):
            yield route, entry.name


def fill(route: str, objects: dict) -> str | None:
    """The route with each path parameter set to the object of that kind; None if it has none."""
    names = re.findall(r"<(?:\w+:)?(\w+)>", route)
    if not names:
        return None
    unknown = [n for n in names if n not in objects]
    assert not unknown, f"{route}: no object to fill in for {unknown}; add it to the world below"
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(objects[m.group(1)]), route).lstrip("^").rstrip("$")


def team_world(name: str, owner, other_members=()):
    team = Team.objects.create(name=name)
    Membership.objects.create(team=team, user=owner, role=Role.ADMIN)
    members = [Membership.objects.create(team=team, user=user, role=role) for user, role in other_members]
    project = Project.objects.create(team=team, name=f"{name}-project", owner=owner)
    experiment = Experiment.objects.create(project=project, name=f"{name}-sweep", owner=owner)
    config = small_config().model_dump(mode="json")
    runs = [
        Run.objects.create(
            project=project,
            experiment=experiment,
            name=f"{name}-secret-run-{i}",
            owner=owner,
            config=config,
            config_hash="0" * 64,
            state="succeeded",
            method="grpo",
        )  # fmt: skip
        for i in range(2)
    ]
    for run in runs:
        write_points(run.id, [("reward/mean", s, s / 10, 0.0) for s in range(3)])
        Sample.objects.create(run=run, step=2, data={"prompt": "1+1", "completion": "2"})
        AuditRecord.objects.create(run=run, record={"packages": {"torch": "2"}})
    token, _ = ApiToken.issue(owner, f"{name}-token")
    link, share_token = create_link(owner, "run", [runs[0]])
    rule = AlertRule.objects.create(project=project, created_by=owner, kind="run_state", states=["failed"],
                                    emails=["owner@example.org"])  # fmt: skip
    return {"run_id": runs[0].id, "run": runs[0].id, "run2": runs[1].id, "experiment_id": experiment.id,
            "experiment": experiment.id, "name": "grpo", "project_id": project.id,
            "names": [r.name for r in runs] + [project.name, token.name, team.name],
            "team_id": team.id, "token_id": token.id, "link_id": link.id, "token": share_token, "rule_id": rule.id,
            "membership_id": members[0].id if members else team.memberships.get().id}  # fmt: skip


@pytest.fixture
def world(django_user_model, monkeypatch):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)  # nothing executes here
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    carol = django_user_model.objects.create_user("carol")  # a viewer of team B
    return {
        "alice": alice, "bob": bob, "carol": carol,
        "A": team_world("team-a", alice), "B": team_world("team-b", bob, [(carol, Role.VIEWER)]),
    }  # fmt: skip


def call(client, method: str, url: str):
    return getattr(client, method.lower())(url, content_type="application/json")


def answered(client, url: str, methods=("GET", "POST", "DELETE")):
    """{method: response} for every method the route does not refuse as not allowed."""
    responses = {m: call(client, m, url) for m in methods}
    return {m: r for m, r in responses.items() if r.status_code != 405}


def unexpected(client, urls, methods, status: int) -> list[str]:
    """Each (method, url) among `urls` answered with anything but `status` (or 405: not a route of it)."""
    return [
        f"{method} {url} ({name}): {response.status_code}"
        for name, url in urls if name != "runs:method-card" and name not in PUBLIC_BY_TOKEN  # public by design
        for method, response in answered(client, url, methods).items() if response.status_code != status
    ]  # fmt: skip


def object_urls(objects: dict) -> list[tuple[str, str]]:
    urls = []
    for route, name in walk():
        filled = fill(route, objects)
        if filled is not None:
            urls.append((name, filled))
        elif name in QUERY_OBJECTS:
            path = "/" + route.lstrip("^").rstrip("$")
            urls.append((name, f"{path}?{QUERY_OBJECTS[name].format(**objects)}"))
            if name in EXPERIMENT_QUERIES:
                urls.append((name, f"{path}?{EXPERIMENT_QUERIES[name].format(**objects)}"))
    return urls


@pytest.mark.django_db
def test_every_route_is_covered_by_the_walk():
    unclassified = [
        (route, name) for route, name in walk()
        if re.search(r"<\w", route) is None and name not in QUERY_OBJECTS and name not in LISTS and name not in FREE
    ]  # fmt: skip
    assert not unclassified, f"classify these routes in {__name__}: {unclassified}"
    ids = dict.fromkeys(["run_id", "run", "run2", "experiment_id", "experiment", "project_id", "team_id", "token_id",
                         "membership_id", "link_id", "token", "rule_id"], 1)  # fmt: skip
    assert len(object_urls({**ids, "name": "x"})) > 15


@pytest.mark.django_db
def test_a_user_of_team_a_gets_404_for_every_object_of_team_b(client, world):
    client.force_login(world["alice"])
    leaks = unexpected(client, object_urls(world["B"]), ("GET", "POST", "DELETE"), 404)
    assert not leaks, leaks
    # the same walk over team A's own objects reaches them: the 404s above are the scoping, not bad URLs
    reached = [url for name, url in object_urls(world["A"]) if call(client, "GET", url).status_code == 200]
    assert len(reached) >= 10, reached


@pytest.mark.django_db
def test_lists_show_only_the_callers_team(client, world):
    client.force_login(world["alice"])
    for route, name in walk():
        if name in LISTS:
            body = client.get("/" + route).content.decode()
            assert any(mine in body for mine in world["A"]["names"]), f"/{route} lists nothing of team A"
            assert not any(secret in body for secret in world["B"]["names"]), f"/{route} lists team B's things"


@pytest.mark.django_db
def test_a_viewer_gets_403_on_every_state_change_and_may_read(client, world):
    client.force_login(world["carol"])
    urls = object_urls(world["B"])
    wrong = unexpected(client, [(n, u) for n, u in urls if n not in PERSONAL], STATE_CHANGES, 403)
    wrong += unexpected(client, [(n, u) for n, u in urls if n in PERSONAL], STATE_CHANGES, 404)
    for url in ("/api/runs", "/runs/launch/", "/compare/sweep/", "/audit/import/", "/api/bundles"):
        response = call(client, "POST", url)
        if response.status_code != 403:
            wrong.append(f"POST {url}: {response.status_code}")
    assert not wrong, wrong
    assert Run.objects.count() == 4, "a viewer's request launched something"
    assert client.get(f"/runs/{world['B']['run']}/").status_code == 200
    assert client.get(f"/api/runs/{world['B']['run']}/series?keys=reward/mean").status_code == 200


@pytest.mark.django_db
def test_a_member_may_not_change_a_colleagues_run_but_a_team_admin_may(client, world, django_user_model):
    dave = django_user_model.objects.create_user("dave")
    Membership.objects.create(team=Team.objects.get(name="team-b"), user=dave, role=Role.MEMBER)
    client.force_login(dave)
    run = world["B"]["run"]
    assert client.post(f"/api/runs/{run}/rerun").status_code == 403
    assert client.post(f"/api/runs/{run}/resume").status_code == 403  # resume, like cancel: the owner or an admin
    assert client.delete(f"/api/runs/{run}").status_code == 403
    client.force_login(world["bob"])  # the team's admin
    assert client.post(f"/api/runs/{run}/rerun").status_code == 201
    assert client.delete(f"/api/runs/{run}").status_code == 204
    assert not Run.objects.filter(id=run).exists()


def websocket_routes(objects: dict) -> list[str]:
    return [fill(str(entry.pattern), objects) for entry in websocket_urlpatterns]


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_every_websocket_route_refuses_another_teams_run(django_user_model):
    try:
        world = await sync_to_async(_websocket_world)(django_user_model)
        for url in websocket_routes(world["B"]):
            for user, allowed in ((world["alice"], False), (world["carol"], True)):
                communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), url)
                communicator.scope["user"] = user
                connected, _ = await communicator.connect()
                assert connected is allowed, f"{url} as {user}: connected={connected}"
                await communicator.disconnect()
    finally:
        await sync_to_async(connections.close_all)()


def _websocket_world(django_user_model):
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    carol = django_user_model.objects.create_user("carol")
    team_world("team-a", alice)
    return {"alice": alice, "carol": carol, "B": team_world("team-b", bob, [(carol, Role.VIEWER)])}
