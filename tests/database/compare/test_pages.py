"""The compare page, its JSON and exports, the sweep form and an experiment's page."""

import csv
import io
import re
from html import unescape

import pyarrow.parquet as pq
import pytest

from rolloutlab.metrics.ingest import write_points
from rolloutlab.runs.models import Experiment, Run
from tests.conftest import project_of
from tests.database.compare.test_comparison import make_run
from tests.forms import form_values

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)


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


def test_a_page_opened_before_its_runs_log_keeps_the_metrics_it_shows(alice_client, alice):
    """The picker offers (and ticks) the view's metrics though the runs have logged only their step-0 evaluation:
    the page writes its picker back into its address, so a metric missing there would vanish from the permalink."""
    run = make_run(project_of(alice), "grpo", 0, lambda t: 0.0, 100, steps=0)
    write_points(run.id, [("eval/pass@1", 0, 0.25, 0.0)])
    page = alice_client.get(f"/compare/?runs={run.id}").content.decode()
    ticked = re.findall(r'<input type="checkbox" name="metrics" value="([^"]+)" checked', page)
    assert ticked == ["eval/pass@1", "reward/mean"]
    assert alice_client.get(f"/api/compare?runs={run.id}").json()["metrics"] == ["eval/pass@1", "reward/mean"]
    write_points(run.id, [("completions/mean_length", 1, 21.0, 0.0)])  # the page's next refresh offers it
    offered = alice_client.get(f"/api/compare?runs={run.id}").json()["metrics"]
    assert offered == ["completions/mean_length", "eval/pass@1", "reward/mean"]


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


def test_the_group_by_select_offers_the_knobs_that_vary_and_the_band_choice_is_in_the_url(alice_client, two_runs):
    ids = ",".join(str(r.id) for r in two_runs)
    page = alice_client.get(f"/compare/?runs={ids}&band=ci&group=objective.name").content.decode()
    select = page.split('id="group-select">')[1].split("</select>")[0]
    assert "<option >method</option>" in select and "<option selected>objective.name</option>" in select
    assert "optimizer.lr" not in select  # the same in both runs
    assert '<option value="ci" selected>' in page and "the default is the min–max of the runs" in page
    data = alice_client.get(f"/api/compare?runs={ids}&band=ci&group=objective.name").json()
    assert data["view"]["band"] == "ci" and "band=ci" in data["permalink"]
    assert data["group_options"][0] == "method" and "objective.name" in data["group_options"]


@pytest.mark.parametrize(
    "query, message",
    [("group=optimizer.lr", "group: 'optimizer.lr' does not differ among these runs"),
     ("group=objective.name;drop", "group: 'method' or a config knob"),
     ("band=sd", "band: one of minmax, ci, se, none"),
     ("target=1e300", "target: a number from -1e+12 to 1e+12")],
)  # fmt: skip
def test_a_bad_group_band_or_target_is_a_400_naming_it_on_the_page_and_the_api(alice_client, two_runs, query, message):
    ids = ",".join(str(r.id) for r in two_runs)
    page = alice_client.get(f"/compare/?runs={ids}&{query}")
    assert page.status_code == 400 and message in unescape(page.content.decode())
    data = alice_client.get(f"/api/compare?runs={ids}&{query}")
    assert data.status_code == 400 and message in data.json()["error"]
    export = alice_client.get(f"/api/compare/export?runs={ids}&{query}")
    assert export.status_code == 400


def test_sharing_a_comparison_grouped_by_a_knob_that_does_not_vary_is_a_400(alice_client, two_runs):
    ids = ",".join(str(r.id) for r in two_runs)
    response = alice_client.post("/compare/share/", {"query": f"runs={ids}&group=optimizer.lr", "days": "7"})
    assert response.status_code == 400 and "does not differ" in unescape(response.content.decode())
