"""The external runs API: a script's own loop reports into a run; what it sends twice is stored once."""

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from rolloutlab.accounts.models import Membership, Role
from rolloutlab.execution.lifecycle import mark_lost_runs
from rolloutlab.metrics.models import MetricBucket, MetricPoint
from rolloutlab.realtime import run_group
from rolloutlab.runs.models import Run, Sample, Transition
from rolloutlab_client.wire import MAX_CONFIG_BYTES, MAX_POINTS
from tests.conftest import project_of

pytestmark = pytest.mark.django_db(transaction=True)  # the points are announced on commit


def post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def start(client, **body):
    response = post(client, "/api/runs/external", {"project": "trl", **body})
    assert response.status_code in (200, 201), response.json()
    return Run.objects.get(id=response.json()["id"])


def points(n_steps, names=("reward/mean", "policy/loss")):
    return [{"name": name, "step": s, "value": s / 10} for s in range(n_steps) for name in names]


def test_it_starts_a_running_external_run_in_the_project_with_its_config(alice_client, alice):
    body = {"project": "trl", "name": "grpo-qwen", "config": {"lr": 1e-6, "model": "qwen"}, "total_steps": 50}
    response = post(alice_client, "/api/runs/external", body)
    assert response.status_code == 201
    run = Run.objects.get(id=response.json()["id"])
    assert response.json()["url"] == f"/runs/{run.id}/"
    assert (run.kind, run.state, run.name, run.project.name, run.owner) == (
        "external",
        "running",
        "grpo-qwen",
        "trl",
        alice,
    )
    assert run.config == {"lr": 1e-6, "model": "qwen"} and run.total_steps == 50 and run.heartbeat_at is not None
    assert [(t.from_state, t.to_state) for t in Transition.objects.filter(run=run)] == [("", "running")]


def test_a_start_sent_again_with_its_key_finds_the_same_run(alice_client):
    first = post(alice_client, "/api/runs/external", {"project": "trl", "key": "run-key-0001"})
    again = post(alice_client, "/api/runs/external", {"project": "trl", "key": "run-key-0001"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"] and Run.objects.count() == 1


def test_external_runs_count_against_the_users_cap_and_a_key_sent_again_is_not_refused(alice_client, settings):
    settings.MAX_ACTIVE_RUNS_PER_USER = 2
    first = post(alice_client, "/api/runs/external", {"project": "trl", "key": "run-key-0001"})
    second = post(alice_client, "/api/runs/external", {"project": "trl"})
    refused = post(alice_client, "/api/runs/external", {"project": "trl"})
    assert (first.status_code, second.status_code, refused.status_code) == (201, 201, 429)
    assert "at most 2" in refused.json()["error"] and Run.objects.count() == 2
    again = post(alice_client, "/api/runs/external", {"project": "trl", "key": "run-key-0001"})
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]  # its own run, found again
    Run.objects.filter(id=first.json()["id"]).update(state="succeeded")
    assert post(alice_client, "/api/runs/external", {"project": "trl"}).status_code == 201


def test_it_refuses_a_config_over_its_bound_and_stores_nothing(alice_client):
    response = post(alice_client, "/api/runs/external", {"project": "trl", "config": {"x": "a" * MAX_CONFIG_BYTES}})
    assert response.status_code == 400 and f"at most {MAX_CONFIG_BYTES} bytes" in response.json()["fields"]["config"]
    assert Run.objects.count() == 0


def test_a_batch_sent_twice_is_stored_once_and_counted_once(alice_client):
    run = start(alice_client)
    batch = {"points": points(200)}
    first = post(alice_client, f"/api/runs/{run.id}/points", batch)
    assert first.status_code == 200 and first.json() == {"received": 400, "stored": 400}
    overlapping = {"points": points(250)}  # a retry that also carries 50 new steps
    assert post(alice_client, f"/api/runs/{run.id}/points", overlapping).json() == {"received": 500, "stored": 100}
    assert MetricPoint.objects.filter(run_id=run.id).count() == 500
    assert sum(MetricBucket.objects.filter(run_id=run.id).values_list("count", flat=True)) == 500
    run.refresh_from_db()
    assert run.step == 249 and run.summary == {"reward/mean": 24.9, "policy/loss": 24.9}


def test_a_late_retry_of_old_steps_does_not_roll_the_summary_back(alice_client):
    run = start(alice_client)
    post(alice_client, f"/api/runs/{run.id}/points", {"points": [{"name": "reward/mean", "step": 9, "value": 0.9}]})
    post(alice_client, f"/api/runs/{run.id}/points", {"points": [{"name": "reward/mean", "step": 3, "value": 0.3}]})
    run.refresh_from_db()
    assert run.step == 9 and run.summary == {"reward/mean": 0.9}


@pytest.mark.parametrize(
    "batch, field",
    [
        ({"points": [{"name": "9lives", "step": 0, "value": 1.0}]}, "points.0.name"),
        ({"points": [{"name": "loss", "step": -1, "value": 1.0}]}, "points.0.step"),
        ({"points": [{"name": "loss", "step": 0, "value": 1.0, "color": "red"}]}, "points.0.color"),
        ({"points": [{"name": "loss", "step": 0, "value": 1.0}] * (MAX_POINTS + 1)}, "points"),
    ],
)
def test_it_refuses_a_bad_batch_naming_the_field_and_stores_none_of_it(alice_client, batch, field):
    run = start(alice_client)
    response = post(alice_client, f"/api/runs/{run.id}/points", batch)
    assert response.status_code == 400 and field in response.json()["fields"]
    assert MetricPoint.objects.filter(run_id=run.id).count() == 0


def test_a_non_finite_value_sent_by_name_is_stored_as_such_and_a_bare_nan_is_refused(alice_client):
    run = start(alice_client)
    body = '{"points": [{"name": "loss", "step": 0, "value": NaN}]}'  # not JSON
    response = alice_client.post(f"/api/runs/{run.id}/points", data=body, content_type="application/json")
    assert response.status_code == 400 and MetricPoint.objects.filter(run_id=run.id).count() == 0
    named = [{"name": "loss", "step": s, "value": v} for s, v in enumerate(["nan", "+inf", "-inf", 0.5])]
    assert post(alice_client, f"/api/runs/{run.id}/points", {"points": named}).json()["stored"] == 4
    kinds = list(MetricPoint.objects.filter(run_id=run.id).order_by("step").values_list("value", "kind"))
    assert kinds == [(None, 1), (None, 2), (None, 3), (0.5, 0)]
    series = alice_client.get(f"/api/runs/{run.id}/series?keys=loss").json()["series"]["loss"]
    assert series["nonfinite"] == [[0, "nan"], [1, "+inf"], [2, "-inf"]]  # drawn as marked gaps
    unknown = {"points": [named[0] | {"value": "inf?"}]}  # a name that is none of the three
    assert post(alice_client, f"/api/runs/{run.id}/points", unknown).status_code == 400


def test_samples_sent_twice_are_stored_once_and_shown_by_the_samples_endpoint(alice_client):
    run = start(alice_client)
    batch = {"samples": [{"key": f"sample-key-{i:04d}", "step": 2, "prompt": "1+2=", "completion": str(i),
                          "reward": float(i == 3), "rewards": {"correct": float(i == 3)}, "advantage": 0.5}
                         for i in range(4)]}  # fmt: skip
    assert post(alice_client, f"/api/runs/{run.id}/samples", batch).json() == {"received": 4, "stored": 4}
    assert post(alice_client, f"/api/runs/{run.id}/samples", batch).json() == {"received": 4, "stored": 0}
    assert Sample.objects.filter(run=run).count() == 4
    shown = alice_client.get(f"/api/runs/{run.id}/samples").json()
    assert shown["step"] == 2 and {s["completion"] for s in shown["samples"]} == {"0", "1", "2", "3"}
    assert shown["samples"][0]["prompt"] == "1+2=" and "key" not in shown["samples"][0]


def test_a_sample_with_a_nul_character_is_refused(alice_client):
    run = start(alice_client)
    bad = {"samples": [{"key": "sample-key-0000", "step": 0, "completion": "a\x00b"}]}
    response = post(alice_client, f"/api/runs/{run.id}/samples", bad)
    assert response.status_code == 400 and "samples.0.completion" in response.json()["fields"]


def test_a_finished_run_is_at_its_last_step_and_its_page_says_where_it_came_from(alice_client):
    run = start(alice_client, total_steps=20)
    post(alice_client, f"/api/runs/{run.id}/points", {"points": points(20)})  # steps 0 .. 19, as range(20) gives
    assert Run.objects.get(id=run.id).step == 19
    post(alice_client, f"/api/runs/{run.id}/finish", {"status": "finished"})
    assert Run.objects.get(id=run.id).step == 20  # finished: 20 / 20, not 19 / 20
    page = alice_client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="external-header"' in page and "reported by alice's script" in page and "queue" not in page
    assert 'id="no-rollout-views"' in page and 'id="groups-chart"' not in page  # no empty panels


def test_finish_ends_the_run_and_a_retry_of_it_is_not_an_error(alice_client):
    run = start(alice_client)
    first = post(alice_client, f"/api/runs/{run.id}/finish", {"status": "finished"})
    assert first.status_code == 200 and first.json()["state"] == "succeeded"
    assert post(alice_client, f"/api/runs/{run.id}/finish", {"status": "finished"}).status_code == 200
    assert post(alice_client, f"/api/runs/{run.id}/finish", {"status": "failed"}).status_code == 409
    late = post(alice_client, f"/api/runs/{run.id}/points", {"points": points(1)})
    assert late.status_code == 409 and "succeeded" in late.json()["error"]


def test_another_teams_user_gets_404_on_every_external_endpoint(client, alice_client, bob):
    run = start(alice_client)
    client.force_login(bob)
    for path, body in [("points", {"points": points(1)}), ("samples", {"samples": []}), ("finish", {})]:
        assert post(client, f"/api/runs/{run.id}/{path}", body).status_code == 404
    assert MetricPoint.objects.filter(run_id=run.id).count() == 0 and Run.objects.get(id=run.id).state == "running"


def test_a_viewer_of_the_team_may_not_report_into_its_runs(client, alice_client, alice, bob):
    run = start(alice_client)
    Membership.objects.create(team=run.project.team, user=bob, role=Role.VIEWER)
    client.force_login(bob)
    assert post(client, f"/api/runs/{run.id}/points", {"points": points(1)}).status_code == 403
    assert post(client, "/api/runs/external", {"project": "trl"}).status_code == 403


def test_a_worker_run_takes_no_reports(alice_client, alice):
    run = Run.objects.create(project=project_of(alice), name="w", owner=alice, config={}, config_hash="0" * 64)
    assert post(alice_client, f"/api/runs/{run.id}/points", {"points": points(1)}).status_code == 409


def test_a_silent_external_run_is_lost_after_its_own_timeout_and_runs_again_when_it_reports(alice_client, settings):
    settings.HEARTBEAT_TIMEOUT_S, settings.EXTERNAL_RUN_TIMEOUT_S = 6, 120
    run = start(alice_client)
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(seconds=60))
    assert mark_lost_runs() == []  # a worker's timeout does not apply to it
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(seconds=121))
    assert mark_lost_runs() == [run.id]
    run.refresh_from_db()
    assert run.state == "lost" and run.detail == "no report from its client for 120 s" and run.finished_at
    assert post(alice_client, f"/api/runs/{run.id}/points", {"points": points(1)}).json()["stored"] == 2
    run.refresh_from_db()
    assert run.state == "running" and run.finished_at is None
    assert [t.to_state for t in Transition.objects.filter(run=run)] == ["running", "lost", "running"]


def test_cancelling_an_external_run_ends_it_and_refuses_its_next_report(alice_client):
    run = start(alice_client)
    assert alice_client.post(f"/api/runs/{run.id}/cancel").status_code == 200
    assert Run.objects.get(id=run.id).state == "cancelled"
    assert post(alice_client, f"/api/runs/{run.id}/points", {"points": points(1)}).status_code == 409
    assert alice_client.post(f"/api/runs/{run.id}/rerun").status_code == 409


def test_an_external_run_offers_no_rerun_nor_launch_like_it_and_a_typed_one_is_a_clear_400(alice_client):
    run = start(alice_client, config={"lr": 1e-6, "model": "qwen"})
    page = alice_client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="rerun-button"' not in page and 'id="launch-like"' not in page
    assert 'id="reported-by-a-script"' in page
    typed = alice_client.get(f"/runs/launch/?from={run.id}")
    assert typed.status_code == 400 and "reported by a script" in typed.content.decode()


def test_the_run_page_of_an_external_run_shows_its_config(alice_client):
    run = start(alice_client, config={"learning_rate": 3e-6})
    response = alice_client.get(f"/runs/{run.id}/")
    assert response.status_code == 200 and "learning_rate: 3.0e-06" in response.content.decode()


def test_points_reach_the_runs_websocket_group_after_commit(alice_client):
    run = start(alice_client)
    layer = get_channel_layer()

    async def listen():  # one event loop throughout: the Redis layer's receive buffer belongs to one
        channel = await layer.new_channel()
        await layer.group_add(run_group(run.id), channel)
        await sync_to_async(post)(alice_client, f"/api/runs/{run.id}/points", {"points": points(3, ("reward/mean",))})
        return [(await asyncio.wait_for(layer.receive(channel), 5))["event"] for _ in range(2)]

    assert async_to_sync(listen)() == [
        {"kind": "points", "points": {"reward/mean": [[0, 0.0], [1, 0.1], [2, 0.2]]}},
        {"kind": "progress", "step": 2, "train_seconds": 0.0},
    ]


def test_every_page_of_a_finished_external_run_opens(alice_client):
    run = start(alice_client, config={"learning_rate": 3e-6})
    post(alice_client, f"/api/runs/{run.id}/points", {"points": points(5)})
    post(alice_client, f"/api/runs/{run.id}/finish", {})
    pages = [
        "/runs/{}/",
        "/audit/runs/{}/",
        "/api/runs/{}/audit",
        "/api/runs/{}/bundle",
        "/compare/?runs={}",
        "/api/compare?runs={}",
        "/api/runs/{}/series?keys=reward/mean",
        "/runs/?sort=-metric:reward/mean",
    ]
    for url in (page.format(run.id) for page in pages):
        assert alice_client.get(url).status_code == 200, url
    assert alice_client.post(f"/api/runs/{run.id}/verify").status_code == 409  # a rerun is its script's to make
