"""Dataset and model paths stay inside DATA_ROOTS: checked at launch (page and API) and at bundle import."""

from __future__ import annotations

import json
import os

import pytest

from rolloutlab.runs.models import Run
from tests.forms import form_values
from tests.offline.engine.bundles import small_bundle
from tests.support.platform_fixtures import SMALL_RUN

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)


@pytest.fixture
def roots(tmp_path, settings):
    """A data root holding a 40-record dataset and a file outside it."""
    root, outside = tmp_path / "data", tmp_path / "elsewhere"
    root.mkdir(), outside.mkdir()
    lines = "".join(json.dumps({"question": f"{i}+1?", "answer": f"#### {i + 1}"}) + "\n" for i in range(40))
    (root / "train.jsonl").write_text(lines)
    (outside / "secret.jsonl").write_text(lines)
    settings.DATA_ROOTS = [root]
    return root, outside


def config(path: str, **task) -> dict:
    return {**SMALL_RUN, "task": {"name": "jsonl", "path": path, **task}, "eval": {"every": 0, "size": 8, "k": 2}}


def api_launch(client, cfg: dict):
    return client.post("/api/runs", data={"config": cfg}, content_type="application/json")


def test_a_dataset_inside_the_root_launches_with_its_path_stored_resolved(alice_client, roots):
    root, _ = roots
    response = api_launch(alice_client, config("train.jsonl"))
    assert response.status_code == 201, response.content
    assert Run.objects.get().config["task"]["path"] == str((root / "train.jsonl").resolve())


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("{outside}/secret.jsonl", "outside this deployment's data roots"),
        ("../elsewhere/secret.jsonl", "outside this deployment's data roots"),
        ("{root}/../elsewhere/secret.jsonl", "outside this deployment's data roots"),
        ("/etc/passwd", "outside this deployment's data roots"),
        ("link.jsonl", "outside this deployment's data roots"),
        ("missing.jsonl", "no such file under the data roots"),
    ],
)
def test_a_dataset_path_outside_the_roots_is_a_field_error_at_the_api(alice_client, roots, path, why):
    root, outside = roots
    os.symlink(outside / "secret.jsonl", root / "link.jsonl")  # a link inside the root that leads out of it
    response = api_launch(alice_client, config(path.format(root=root, outside=outside)))
    assert response.status_code == 400
    assert why in response.json()["fields"]["task.path"]
    assert Run.objects.count() == 0


def test_the_yaml_check_names_a_path_outside_the_roots_as_the_launch_does(alice_client, roots):
    text = "task: {name: jsonl, path: /etc/passwd}\neval: {size: 8}\n"
    check = alice_client.post("/runs/launch/check/", {"config_yaml": text}).json()
    assert "outside this deployment's data roots" in check["errors"]["task.path"]
    launch = alice_client.post("/runs/launch/", {"mode": "yaml", "config_yaml": text, "project": "p"})
    assert launch.status_code == 400 and Run.objects.count() == 0


def test_the_launch_page_shows_the_path_error_beside_its_field(alice_client, roots):
    _, outside = roots
    values = form_values(alice_client.get("/runs/launch/").content.decode())
    values.update({"task.name": "jsonl", "task.path": str(outside / "secret.jsonl"), "eval.size": "8"})
    response = alice_client.post("/runs/launch/", values)
    assert response.status_code == 400
    assert 'data-field="task.path">' in response.content.decode()
    assert "outside this deployment&#x27;s data roots" in response.content.decode()
    assert Run.objects.count() == 0


def test_eval_size_over_the_rows_of_the_dataset_is_a_field_error(alice_client, roots):
    response = api_launch(alice_client, {**config("train.jsonl"), "eval": {"every": 0, "size": 40, "k": 2}})
    assert response.status_code == 400
    assert "leave none of task.path's 40 records" in response.json()["fields"]["eval.size"]
    response = api_launch(alice_client, {**config("train.jsonl", eval_path="train.jsonl"),
                                         "eval": {"every": 0, "size": 41, "k": 2}})  # fmt: skip
    assert "task.eval_path holds 40 records" in response.json()["fields"]["eval.size"]


def test_a_model_directory_outside_the_roots_is_a_field_error(alice_client, roots, settings):
    root, outside = roots
    settings.MODEL_ROOTS = [root]
    (outside / "config.json").write_text("{}")
    response = api_launch(alice_client, {**SMALL_RUN, "model": {"name": str(outside)}})
    assert response.status_code == 400
    assert "outside this deployment's model roots (MODEL_ROOTS: " in response.json()["fields"]["model.name"]


def test_the_tiny_model_needs_no_path(alice_client, roots):
    assert api_launch(alice_client, SMALL_RUN).status_code == 201


def test_a_bundle_whose_config_reads_outside_the_roots_is_refused_at_import(alice_client, roots):
    from tests.conftest import small_config

    _, outside = roots
    cfg = small_config().model_dump(mode="json")
    cfg["task"] = {"name": "jsonl", "path": str(outside / "secret.jsonl")}
    cfg["eval"]["size"] = 8
    response = alice_client.post("/api/bundles", data=small_bundle(config=cfg), content_type="application/zip")
    assert response.status_code == 400
    assert "config.yaml: task.path: " in response.json()["error"]
    assert "outside this deployment's data roots" in response.json()["error"]
    assert Run.objects.count() == 0
