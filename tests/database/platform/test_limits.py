"""The deployment's ceilings on run size and on runs per user hold at launch, on the API and the form alike."""

import json

import pytest

from rolloutlab.runs.models import Run
from tests.support.platform_fixtures import SMALL_RUN

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)


def launch(client, **sections):
    config = {**SMALL_RUN, **{k: {**SMALL_RUN.get(k, {}), **v} for k, v in sections.items()}}
    return client.post("/api/runs", data=json.dumps({"config": config}), content_type="application/json")


@pytest.mark.parametrize(
    "sections, field",
    [
        ({"rollout": {"prompts_per_step": 50_000}}, "rollout.prompts_per_step"),
        ({"model": {"hidden_size": 2048, "layers": 48, "heads": 16}}, "model.hidden_size"),
        ({"eval": {"size": 100, "samples": 1024}}, "eval.size"),
        ({"schedule": {"steps": 10**8}}, "schedule.steps"),
        ({"resources": {"device": "cpu", "wall_time_s": 25 * 3600}}, "resources.wall_time_s"),
        ({"resources": {"device": "cpu", "executor": "ray", "rollout_actors": 1000}}, "resources.rollout_actors"),
    ],
)
def test_a_config_over_a_ceiling_is_refused_beside_its_field(alice_client, sections, field):
    response = launch(alice_client, **sections)
    assert response.status_code == 400
    assert "this deployment allows at most" in response.json()["fields"][field]
    assert Run.objects.count() == 0


def test_the_ceilings_follow_the_settings(alice_client, settings):
    settings.RUN_LIMITS = {**settings.RUN_LIMITS, "rollouts_per_step": 8}
    assert launch(alice_client, rollout={"prompts_per_step": 2, "group_size": 4}).status_code == 201
    assert launch(alice_client, rollout={"prompts_per_step": 3, "group_size": 4}).status_code == 400


def test_the_form_shows_each_ceiling(alice_client, settings):
    settings.RUN_LIMITS = {**settings.RUN_LIMITS, "max_new_tokens": 321}
    page = alice_client.get("/runs/launch/").content.decode()
    assert "deployment limit: 321 new tokens a completion" in page


def test_a_user_may_have_only_so_many_runs_queued_or_running(alice_client, settings):
    settings.MAX_ACTIVE_RUNS_PER_USER = 2
    assert [launch(alice_client).status_code for _ in range(2)] == [201, 201]
    refused = launch(alice_client)
    assert refused.status_code == 429 and "at most 2" in refused.json()["error"]
    Run.objects.filter(id=Run.objects.order_by("id").first().id).update(state="cancelled")
    assert launch(alice_client).status_code == 201
