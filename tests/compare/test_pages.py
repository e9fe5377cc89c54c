"""The compare page, its JSON and exports, the sweep form and an experiment's page."""

import csv
import io
from html import unescape

import pyarrow.parquet as pq
import pytest

from rolloutlab.metrics.ingest import write_points
from rolloutlab.runs.models import Experiment, Run
from tests.compare.test_comparison import make_run
from tests.conftest import project_of
from tests.forms import form_values

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr("rolloutlab.runs.services.submit", lambda run_id: None)


@pytest.fixture
def two_runs(alice):

    project = project_of(alice)
    return [make_run(project, m, 0, lambda t: t / 10, 100, steps=20) for m in ("grpo", "gspo")]


def test_the_page_and_its_data(alice_client, two_runs):
    ids = ",".join(str(r.id) for r in two_runs)
    page = alice_client.get(f"/compare/?runs={ids}&metrics=reward/mean&x=tokens")
    assert page.status_code == 200 and 'value="tokens" checked' in page.content.decode()
    data = alice_client.get(f"/api/compare?runs={ids}&metrics=reward/mean&x=tokens").json()
    assert [g["label"] for g in data["groups"]] == ["grpo", "gspo"]
    assert data["permalink"].startswith(f"runs={ids}&group=method&metrics=reward/mean&x=tokens")
    assert data["charts"]["reward/mean"]["grpo"]["x"][-1] == 2000.0  # 20 steps x 100 tokens


def test_a_bad_view_is_a_400_that_names_the_parameter(alice_client, two_runs):
    page = alice_client.get(f"/compare/?runs={two_runs[0].id}&x=hours")
    assert page.status_code == 400 and "x: one of step, tokens, seconds" in unescape(page.content.decode())
    data = alice_client.get("/api/compare?runs=999999")
    assert data.status_code == 404 and "no run #999999" in data.json()["error"]


def test_csv_export_holds_every_point_with_its_counters(alice_client, two_runs):
    ids = ",".join(str(r.id) for r in two_runs)
    response = alice_client.get(f"/api/compare/export?runs={ids}&metrics=reward/mean&format=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 40 and rows[0]["group"] == "grpo" and rows[0]["metric"] == "reward/mean"
    assert float(rows[4]["rollout_tokens"]) == 500.0 and float(rows[4]["value"]) == 0.5


def test_parquet_export_is_the_same_table(alice_client, two_runs):
    ids = ",".join(str(r.id) for r in two_runs)
    response = alice_client.get(f"/api/compare/export?runs={ids}&metrics=reward/mean&format=parquet")
    table = pq.read_table(io.BytesIO(response.content))
    assert table.num_rows == 40 and table.column_names[:4] == ["run", "run_name", "group", "metric"]


def sweep_form(client, method="grpo"):
    values = form_values(client.get(f"/compare/sweep/?method={method}").content.decode())
    values.pop("methods", None)  # the tests tick the methods themselves
    return values


def test_a_sweep_launches_methods_by_seeds_by_grid_as_one_experiment(alice_client):
    values = sweep_form(alice_client)
    values.update({"methods": ["grpo", "mc-grpo"], "seeds": "0, 1", "grid1_knob": "optimizer.lr",
                   "grid1_values": "1e-4, 3e-4", "rollout.group_size": "4", "name": "lr sweep"})  # fmt: skip
    response = alice_client.post("/compare/sweep/", values)
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/compare/experiments/{experiment.id}/"
    runs = list(Run.objects.filter(experiment=experiment).order_by("id"))
    assert len(runs) == 8 and experiment.name == "lr sweep"
    cells = {(r.method, r.seed, r.config["optimizer"]["lr"]) for r in runs}
    assert cells == {(m, s, lr) for m in ("grpo", "mc-grpo") for s in (0, 1) for lr in (1e-4, 3e-4)}
    assert all(r.config["rollout"]["group_size"] == 4 for r in runs)  # the change applies to every method
    mc = [r for r in runs if r.method == "mc-grpo"]
    assert all(r.config["generate"]["name"] == "pivot" for r in mc)  # and each keeps its own preset
    page = alice_client.get(f"/compare/experiments/{experiment.id}/").content.decode()
    assert "8 queued" in page and f"experiment={experiment.id}" in page


def test_a_bad_sweep_names_the_field_and_queues_nothing(alice_client):
    values = sweep_form(alice_client)
    values.update({"methods": ["grpo"], "seeds": "a", "rollout.group_size": "1"})
    response = alice_client.post("/compare/sweep/", values)
    assert response.status_code == 400 and 'data-field="seeds"' in response.content.decode()
    values["seeds"] = "0"
    response = alice_client.post("/compare/sweep/", values)
    assert 'data-field="rollout.group_size"' in response.content.decode()
    values.update({"rollout.group_size": "4", "grid1_knob": "optimizer.lr", "grid1_values": "-1"})
    response = alice_client.post("/compare/sweep/", values)
    assert "optimizer.lr=-1" in unescape(response.content.decode())
    assert Run.objects.count() == 0 and Experiment.objects.count() == 0


def test_points_written_later_show_up_in_the_next_refresh(alice_client, two_runs):
    run = two_runs[0]
    ids = ",".join(str(r.id) for r in two_runs)
    before = alice_client.get(f"/api/compare?runs={ids}&metrics=reward/mean").json()["charts"]["reward/mean"]["grpo"]
    write_points(run.id, [("reward/mean", 21, 5.0, 0.0), ("counters/rollout_tokens", 21, 2100, 0.0)])
    after = alice_client.get(f"/api/compare?runs={ids}&metrics=reward/mean").json()["charts"]["reward/mean"]["grpo"]
    assert after["x"][-1] == 21 > before["x"][-1]
