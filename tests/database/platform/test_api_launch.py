"""The JSON API: launching validates first and queues nothing on bad input."""

import json

import pytest

from rolloutlab.accounts.models import ApiToken
from rolloutlab.runs.models import Run, Transition
from tests.support.platform_fixtures import SMALL_RUN

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    """These tests are about validation and records: nothing is executed."""
    sent = []
    monkeypatch.setattr("rolloutlab.execution.services.submit", sent.append)
    return sent


def post(client, body, **headers):
    return client.post("/api/runs", data=json.dumps(body), content_type="application/json", **headers)


def test_it_requires_authentication(client):
    response = client.get("/api/runs")
    assert response.status_code == 401
    assert "authentication required" in response.json()["error"]


def test_it_launches_a_valid_config_as_a_queued_run(alice_client, no_dispatch, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(alice_client, {"config": SMALL_RUN, "name": "first", "tags": ["smoke"], "project": "arith"})
    assert response.status_code == 201
    run = Run.objects.get(id=response.json()["id"])
    assert run.state == "queued" and run.name == "first" and run.project.name == "arith"
    assert run.config["rollout"]["group_size"] == 4 and run.config_hash == response.json()["config_hash"]
    assert list(run.tags.values_list("name", flat=True)) == ["smoke"]
    assert run.queue == "cpu" and run.total_steps == 4
    assert Transition.objects.get(run=run).to_state == "queued"
    assert no_dispatch == [run.id]


@pytest.mark.parametrize(
    "config, field, text",
    [
        ({"rollout": {"group_size": 1}}, "rollout.group_size", "greater than or equal to 2"),
        ({"optimizer": {"lr": -1}}, "optimizer.lr", "greater than 0"),
        ({"rollout": {"groupsize": 4}}, "rollout.groupsize", "unknown knob"),
        ({"method": "ppo"}, "method", "unknown method 'ppo'"),
        ({"advantage": {"name": "mean"}}, "advantage.name", "unknown advantage estimator"),
    ],
)
def test_it_rejects_a_bad_config_with_field_errors_and_queues_nothing(alice_client, no_dispatch, config, field, text):
    response = post(alice_client, {"config": config})
    assert response.status_code == 400
    assert text in response.json()["fields"][field]
    assert Run.objects.count() == 0 and no_dispatch == []


def test_it_rejects_a_body_that_is_not_json(alice_client):
    response = alice_client.post("/api/runs", data="{nope", content_type="application/json")
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]
    assert Run.objects.count() == 0


def test_it_accepts_a_bearer_token(client, alice):
    _, raw = ApiToken.issue(alice, "laptop")
    response = post(client, {"config": SMALL_RUN}, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 201
    assert Run.objects.get().owner == alice


def test_it_refuses_a_wrong_token(client, alice):
    ApiToken.issue(alice, "laptop")
    assert post(client, {"config": SMALL_RUN}, HTTP_AUTHORIZATION="Bearer nope").status_code == 401


def test_it_lists_and_filters_runs(alice_client):
    for method in ("grpo", "dapo"):
        post(alice_client, {"config": {**SMALL_RUN, "method": method}})
    names = [r["method"] for r in alice_client.get("/api/runs?method=dapo").json()["runs"]]
    assert names == ["dapo"]


def test_it_serves_the_schema(alice_client):
    schema = alice_client.get("/api/schema").json()
    assert "rollout" in schema["properties"] and "grpo" in schema["x-methods"]


def test_cancel_of_a_queued_run_cancels_it(alice_client):
    run_id = post(alice_client, {"config": SMALL_RUN}).json()["id"]
    response = alice_client.post(f"/api/runs/{run_id}/cancel")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert alice_client.post(f"/api/runs/{run_id}/cancel").status_code == 409


def test_rerun_clones_the_config_and_remembers_the_parent(alice_client):
    run_id = post(alice_client, {"config": SMALL_RUN}).json()["id"]
    again = alice_client.post(f"/api/runs/{run_id}/rerun").json()
    assert again["parent"] == run_id and again["config_hash"] == Run.objects.get(id=run_id).config_hash


def test_series_rejects_a_bad_points_argument(alice_client):
    run_id = post(alice_client, {"config": SMALL_RUN}).json()["id"]
    assert alice_client.get(f"/api/runs/{run_id}/series?keys=a&points=x").status_code == 400
    assert alice_client.get(f"/api/runs/{run_id}/series?keys=a&points=1").status_code == 400
    assert alice_client.get("/api/runs/999999/series?keys=a").status_code == 404
