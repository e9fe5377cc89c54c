"""The run config as hostile input, wherever it enters: typed in the API's document, checked at one entry point.

Every section and knob of the config may arrive with the wrong JSON type, a NUL byte, Unicode digits, a huge
number, deep nesting or an unknown key, through the API, the YAML check, the YAML launch or a sweep's grid.
None of it is a 500, each is a 400 naming the field, and nothing is launched. A fuzz generated from the
config's own JSON Schema (the launch operation's body in /api/openapi.json) sends thousands more.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode

from rolloutlab.accounts.models import ApiToken
from rolloutlab.runs.models import Run
from workers.config import RunConfig, input_schema

SECTIONS = ["method", "seed", *[name for name in RunConfig.model_fields if name not in ("method", "seed")]]


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"x": value}
    return value


# the values a whole section (or the method, or the seed) was seen to be sent as
HOSTILE = {
    "a list": ["grpo"],
    "an empty list": [],
    "a number": 7,
    "null": None,
    "a bool": True,
    "1e30": 1e30,
    "a NUL string": "a\x00b",
    "Unicode digits": "١٢",
    "40 digits": 10**40,
    "60 levels of nesting": nested(60),
}


def valid(section: str, label: str) -> bool:
    """The few of these values a field may take: 7 is a seed, JSON's true is the integer 1 to pydantic's lax mode (as
    the form's "1" is), and a config with no method is one with no preset."""
    return (section, label) in {("seed", "a bool"), ("seed", "a number"), ("method", "null")}


def names(fields: dict, section: str) -> bool:
    """Whether an answer's fields name the section (or one of its knobs)."""
    return any(key == section or key.startswith(section + ".") for key in fields)


@pytest.mark.django_db
@pytest.mark.parametrize("section", SECTIONS)
def test_a_wrong_value_for_any_section_is_a_400_naming_it_through_the_api_and_launches_nothing(alice_client, section):
    for label, value in HOSTILE.items():
        if valid(section, label):
            continue
        body = json.dumps({"config": {section: value}})
        response = alice_client.post("/api/runs", data=body, content_type="application/json")
        assert response.status_code == 400, (section, label, response.status_code)
        assert names(response.json()["fields"], section), (section, label, response.json())
    assert Run.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("section", SECTIONS)
def test_a_wrong_value_for_any_section_is_named_by_the_yaml_check_and_refused_by_the_yaml_launch(alice_client, section):
    for label, value in HOSTILE.items():
        if valid(section, label):
            continue
        text = json.dumps({section: value})  # JSON is YAML
        check = alice_client.post("/runs/launch/check/", {"config_yaml": text})
        assert check.status_code == 200 and names(check.json()["errors"], section), (section, label, check.content)
        launch = alice_client.post("/runs/launch/", {"mode": "yaml", "config_yaml": text, "project": "p"})
        assert launch.status_code == 400, (section, label, launch.status_code)
    assert Run.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "knob, values, named",
    [
        ("method", "[grpo]", "method"),
        ("seed.x", "1", "seed.x"),
        ("rollout.group_size", "1" * 40, "rollout.group_size"),
        ("schedule.minibatches", "1000000000", "schedule.minibatches"),
    ],
)
def test_sweep_grid_values_of_the_wrong_shape_are_a_400_naming_the_knob(alice_client, knob, values, named):
    post = {"methods": "grpo", "method": "grpo", "seeds": "0", "grid1_knob": knob, "grid1_values": values}
    response = alice_client.post("/compare/sweep/", post)
    assert response.status_code == 400, response.status_code
    assert named in response.content.decode()
    assert Run.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "knob, value",
    [
        ("schedule.samples_per_step", 10**9),
        ("schedule.updates_per_batch", 10**9),
        ("schedule.minibatches", 10**9),
        ("filter", {"name": "dynamic-sampling", "max_rounds": 10**9}),
        ("optimizer.warmup_steps", 10**12),
        ("rollout.top_k", 10**12),
    ],
)
def test_sizes_far_past_any_run_are_refused_naming_the_knob(alice_client, knob, value):
    section, _, name = knob.partition(".")
    config = {section: {name: value}} if name else {section: value}
    response = alice_client.post("/api/runs", data=json.dumps({"config": config}), content_type="application/json")
    assert response.status_code == 400
    assert any(key.startswith(section) for key in response.json()["fields"]), response.json()
    assert Run.objects.count() == 0


def test_every_number_and_text_of_the_config_has_a_bound():
    unbounded = []

    def walk(node, path):
        if not isinstance(node, dict):
            return
        if node.get("type") in ("integer", "number") and not {"maximum", "exclusiveMaximum"} & set(node):
            unbounded.append(path)
        if node.get("type") == "string" and not {"maxLength", "enum", "const"} & set(node):
            unbounded.append(path)
        for name, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{name}".strip("."))
        for sub in node.get("anyOf", []):
            walk(sub, path)
        for key in ("items", "additionalProperties"):
            walk(node.get(key), path + "[]")

    walk(input_schema(), "")
    assert unbounded == []


@pytest.fixture
def launch_operation(db):
    """POST /api/runs from the served document, called in-process (requests keep the test's connection)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
    yield schema["/api/runs"]["POST"]
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


GENERATED = 500  # configs per mode: valid by the document, then invalid; 1,000 in all (bounded: a minute here)


def test_configs_generated_from_the_schema_are_never_a_500_and_every_refusal_names_a_field(
    launch_operation, django_user_model, monkeypatch
):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    monkeypatch.setattr("rolloutlab.execution.limits.check_active_runs", lambda user, adding=1: None)
    monkeypatch.setattr("rolloutlab.execution.services.check_active_runs", lambda user, adding=1: None)
    user = django_user_model.objects.create_user("fuzz")
    token = ApiToken.issue(user, "fuzz")[1]
    statuses: list[int] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

        @given(case=launch_operation.as_strategy(generation_mode=mode))
        @settings(max_examples=GENERATED, derandomize=True, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
        def send(case):
            response = case.call(headers={"Authorization": f"Bearer {token}"})
            statuses.append(response.status_code)
            assert response.status_code in (201, 400, 422), (response.status_code, case.body)
            if response.status_code == 400:  # named: the field, or the body when it is not a JSON object at all
                answer = response.json()
                assert answer["fields"] or "body" in answer["error"], answer

        send()
    assert len(statuses) >= 2 * GENERATED * 0.9  # hypothesis may stop a little short on duplicates
    assert Run.objects.count() == statuses.count(201)  # a run exactly for each 201: nothing half-written
    assert statuses.count(201) > 0 and statuses.count(400) > 0
