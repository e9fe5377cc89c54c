"""The launch page: a form generated from RunConfig's JSON Schema, errors shown beside their fields."""

import re

import pytest
from django.test import Client
from django.utils.html import escape

from rolloutlab.runs.models import Run
from tests.conftest import project_of
from tests.forms import form_values
from tests.support.chat_models import save_chat_llama
from workers.config import METHODS

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)


def launch_form(client, query=""):
    """What the browser would submit for the launch page as served."""
    return form_values(client.get("/runs/launch/" + query).content.decode())


def test_it_redirects_anonymous_users_to_login(client):
    response = client.get("/runs/launch/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_renders_every_knob_of_the_schema_with_the_preset_values(alice_client):
    page = alice_client.get("/runs/launch/?method=dapo").content.decode()
    for name in ("rollout.group_size", "objective.clip_high", "filter.max_rounds", "reward.weights", "seed"):
        assert f'name="{name}"' in page
    values = launch_form(alice_client, "?method=dapo")
    assert values["objective.clip_high"] == "0.28" and values["filter.name"] == "dynamic-sampling"
    assert values["method"] == "dapo"


def test_submitting_the_form_as_served_launches_that_method(alice_client):
    values = launch_form(alice_client, "?method=mc-grpo")
    values["rollout.group_size"] = "4"
    response = alice_client.post("/runs/launch/", values)
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/"
    assert run.method == "mc-grpo" and run.config["rollout"]["group_size"] == 4
    assert run.config["generate"]["name"] == "pivot"


def test_a_bad_knob_is_shown_beside_its_field_and_nothing_is_queued(alice_client):
    values = launch_form(alice_client)
    values["rollout.group_size"] = "1"
    values["optimizer.lr"] = "-3"
    values["reward.weights"] = "{not json"
    response = alice_client.post("/runs/launch/", values)
    page = response.content.decode()
    assert response.status_code == 400
    assert 'data-field="reward.weights">not valid JSON' in page
    assert Run.objects.count() == 0
    values["reward.weights"] = '{"correct": 1.0}'
    page = alice_client.post("/runs/launch/", values).content.decode()
    assert 'data-field="rollout.group_size">Input should be greater than or equal to 2' in page
    assert 'data-field="optimizer.lr">Input should be greater than 0' in page
    assert 'value="1"' in page  # what the user typed is kept
    assert Run.objects.count() == 0


def test_worked_examples_are_typed_as_json_and_a_malformed_one_is_shown_beside_its_field(alice_client):
    values = launch_form(alice_client)
    assert values["prompt.examples"] == "[]"
    values["prompt.examples"] = '[[{"role": "user", "content": "2+2="}, {"role": "user", "content": "4"}]]'
    page = alice_client.post("/runs/launch/", values).content.decode()
    assert 'data-field="prompt.examples">' in page and "alternate user, assistant" in page
    assert Run.objects.count() == 0
    values["prompt.examples"] = '[[{"role": "user", "content": "2+2="}, {"role": "assistant", "content": "4"}]]'
    assert alice_client.post("/runs/launch/", values).status_code == 302
    assert Run.objects.get().config["prompt"]["examples"] == [[{"role": "user", "content": "2+2="},
                                                               {"role": "assistant", "content": "4"}]]  # fmt: skip
    values["prompt.examples"] = ""  # left blank: none
    assert alice_client.post("/runs/launch/", values).status_code == 302


def test_it_prefills_from_an_existing_run(alice_client):
    values = launch_form(alice_client)
    values["seed"] = "42"
    alice_client.post("/runs/launch/", values)
    run = Run.objects.get()
    assert launch_form(alice_client, f"?from={run.id}")["seed"] == "42"


def test_the_runs_list_sorts_by_any_final_metric(alice_client, alice):
    project = project_of(alice)
    for name, value in (("low", 0.1), ("high", 0.9), ("none", None)):
        summary = {} if value is None else {"policy/entropy": value}
        Run.objects.create(project=project, name=name, owner=alice, config={}, config_hash="0" * 64, summary=summary)
    page = alice_client.get("/runs/?sort=-metric:policy/entropy").content.decode()
    assert page.index(">high<") < page.index(">low<") < page.index(">none<")  # runs without it last
    assert 'value="-metric:policy/entropy" selected' in page
    page = alice_client.get("/runs/?sort=metric:policy/entropy").content.decode()
    assert page.index(">low<") < page.index(">high<") < page.index(">none<")


def test_a_stage_shows_each_knob_with_the_components_that_own_it(alice_client):
    page = alice_client.get("/runs/launch/?method=dapo").content.decode()
    assert 'data-components="dynamic-sampling"' in page  # max_rounds, signal
    assert 'data-components="dynamic-sampling none"' in page  # overlong: every filter has it
    values = launch_form(alice_client, "?method=dapo")
    assert values["filter.name"] == "dynamic-sampling" and values["filter.signal"] == "correct"


def test_switching_a_stage_component_sends_only_that_components_knobs(alice_client):
    values = launch_form(alice_client, "?method=dapo")
    values["filter.name"] = "none"  # the form still holds dapo's filter.max_rounds and filter.signal
    response = alice_client.post("/runs/launch/", values)
    run = Run.objects.get()
    assert response.status_code == 302
    assert run.config["filter"] == {"name": "none", "overlong": False}
    assert run.config["objective"]["clip_high"] == 0.28  # the rest of the preset stays


def test_the_task_model_and_executor_show_each_knob_with_the_kinds_that_own_it(alice_client):
    page = alice_client.get("/runs/launch/").content.decode()
    assert 'data-switch="task.name" data-kinds="arith chain countdown grid jsonl lookup parquet word-problems"' in page
    assert (
        'data-switch="model.name" data-kinds="tiny smollm2-135m-instruct pretrained" data-other-kind="pretrained"'
        in page
    )
    assert 'data-switch="resources.executor" data-kinds="local ray"' in page
    assert re.search(r'data-name="task.shortcut_share" data-components="chain"', page)
    assert re.search(r'data-name="task.path" data-components="jsonl parquet"', page)
    assert re.search(r'data-name="model.hidden_size" data-components="tiny"', page)
    assert re.search(r'data-name="resources.rollout_actors" data-components="ray"', page)
    assert '<input name="model.name" id="f-model.name" value="tiny"' in page  # any directory may be typed


def test_switching_the_task_model_and_executor_sends_only_their_kinds_knobs(alice_client, tmp_path, settings):
    settings.DATA_ROOTS = settings.MODEL_ROOTS = [tmp_path]
    save_chat_llama(tmp_path / "m")
    (tmp_path / "train.jsonl").write_text('{"question": "1+1?", "answer": "#### 2"}\n' * 300)
    values = launch_form(alice_client)  # the form holds every kind's knobs at their defaults
    values.update({"task.name": "jsonl", "task.path": "train.jsonl", "model.name": str(tmp_path / "m"),
                   "resources.executor": "ray", "resources.rollout_actors": "3"})  # fmt: skip
    response = alice_client.post("/runs/launch/", values)
    assert response.status_code == 302, response.content.decode()[:2000]
    config = Run.objects.get().config
    assert set(config["task"]) == {"name", "path", "eval_path", "question_field", "answer_field", "verifier",
                                   "answer_position", "extraction"}  # fmt: skip
    pretrained = {"lora_rank": 0, "lora_alpha": 32.0, "lora_target_modules": "all-linear"}
    pretrained |= {"attn_implementation": "sdpa", "gradient_checkpointing": False, "autocast": "none"}
    assert config["model"] == {"name": str((tmp_path / "m").resolve()), "dtype": "float32", **pretrained}
    assert config["resources"]["executor"] == "ray" and config["resources"]["rollout_actors"] == 3


def test_a_problem_of_a_kinds_knobs_is_filed_under_the_field(alice_client):
    values = launch_form(alice_client)
    values.update({"task.name": "jsonl", "task.path": "", "model.heads": "3"})
    page = alice_client.post("/runs/launch/", values).content.decode()
    assert "task &#x27;jsonl&#x27; needs task.path, the dataset file" in page
    assert "heads (3) must divide hidden_size (128)" in page
    assert Run.objects.count() == 0


def test_the_launch_page_lists_every_method_with_its_summary_and_card(alice_client):
    page = alice_client.get("/runs/launch/?method=mopps").content.decode()
    for name, preset in METHODS.items():
        assert f'<a href="/runs/methods/{name}/">{name}</a>: {escape(preset.summary)}' in page
    assert 'id="method-card-link"' in page


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_card_is_served_rendered(alice_client, name):
    page = alice_client.get(f"/runs/methods/{name}/").content.decode()
    assert "<h1>" in page and "<table>" in page and f'href="/runs/launch/?method={name}"' in page


def test_a_card_that_is_no_method_is_a_404(alice_client):
    assert alice_client.get("/runs/methods/..%2Fdeploy/").status_code == 404
    assert alice_client.get("/runs/methods/nothing/").status_code == 404


def test_the_page_warns_beside_the_form_of_a_clip_range_one_pass_leaves_inert(alice_client):
    values = launch_form(alice_client, "?method=grpo")
    assert values["schedule.minibatches"] == "2"  # the default schedule lets the clip act: no warning
    page = alice_client.get("/runs/launch/").content.decode()
    assert '<aside class="warnings" id="schedule-warnings" hidden>' in page
    values["schedule.minibatches"], values["name"] = "1", "one-minibatch"
    assert alice_client.post("/runs/launch/", values).status_code == 302  # a warning is not an error
    page = alice_client.get(f"/runs/launch/?from={Run.objects.get(name='one-minibatch').id}").content.decode()
    assert 'id="schedule-warnings"' in page and "objective.clip_low, objective.clip_high: cannot act" in page
    assert page.index('id="schedule-warnings"') < page.index('id="launch-form"')


def test_the_warning_goes_with_two_passes_and_never_stops_a_launch(alice_client):
    values = launch_form(alice_client, "?method=grpo")
    values["schedule.minibatches"] = "1"
    for passes in ("1", "2"):
        values["schedule.updates_per_batch"], values["name"] = passes, f"passes-{passes}"
        assert alice_client.post("/runs/launch/", values).status_code == 302  # a warning is not an error
    one, two = (Run.objects.get(name=f"passes-{p}") for p in "12")
    assert "cannot act" in alice_client.get(f"/runs/launch/?from={one.id}").content.decode()
    assert (
        '<aside class="warnings" id="schedule-warnings" hidden>'
        in alice_client.get(f"/runs/launch/?from={two.id}").content.decode()
    )
    values["schedule.updates_per_batch"], values["optimizer.lr"] = "1", "-1"
    page = alice_client.post("/runs/launch/", values).content.decode()
    assert 'data-field="optimizer.lr"' in page and "cannot act" not in page  # an invalid config: errors only


def test_the_warnings_follow_the_form_as_it_is_edited(alice_client):
    values = launch_form(alice_client, "?method=grpo")
    assert alice_client.post("/runs/launch/warnings/", values).json()["warnings"] == []
    values["schedule.minibatches"] = "1"
    warned = alice_client.post("/runs/launch/warnings/", values).json()["warnings"]
    assert len(warned) == 1 and warned[0].startswith("objective.clip_low, objective.clip_high: cannot act")
    values["schedule.minibatches"] = "2"
    assert alice_client.post("/runs/launch/warnings/", values).json()["warnings"] == []


def test_a_preset_brings_its_papers_schedule_and_the_form_names_its_objective_when_it_is_undone(alice_client):
    values = launch_form(alice_client, "?method=gspo")
    assert values["schedule.minibatches"] == "4"
    assert alice_client.post("/runs/launch/warnings/", values).json()["warnings"] == []
    values["schedule.minibatches"] = "1"
    warned = alice_client.post("/runs/launch/warnings/", values).json()["warnings"]
    assert [w.split(":")[0] for w in warned] == ["objective 'sequence-clip'", "objective.clip_low, objective.clip_high"]
    values["schedule.minibatches"], values["reward.weights"] = "1", "{not json"
    assert alice_client.post("/runs/launch/warnings/", values).json()["warnings"] == []  # errors are the form's
    assert Run.objects.count() == 0
    assert Client().post("/runs/launch/warnings/", values).status_code == 302  # anonymous: to the login


# ------------------------------------------------------------------ presets and the YAML editor
def test_each_presets_differences_from_grpo_are_exactly_what_it_changes():
    from rolloutlab.execution.forms import preset_values

    values = preset_values()
    assert values["presets"]["grpo"] == {}
    dapo = values["presets"]["dapo"]
    assert dapo["filter.name"] == "dynamic-sampling" and values["base"]["filter.name"] == "none"
    assert all(values["base"][name] != value for name, value in dapo.items())


@pytest.mark.parametrize(
    "text, problem",
    [
        ("a: &x [1]\nb: *x\n", "anchors and aliases"),
        ("- 1\n- 2\n", "a mapping of sections"),
        ("rollout: {group_size: [\n", "not valid YAML at line"),
        ("x" * 100_001, "at most 100000 characters"),
    ],
)
def test_the_yaml_editor_refuses_what_is_not_a_bounded_plain_mapping(alice_client, text, problem):
    answer = alice_client.post("/runs/launch/check/", {"config_yaml": text})
    assert answer.status_code == 200 and problem in answer.json()["errors"]["config_yaml"]
    launched = alice_client.post("/runs/launch/", {"mode": "yaml", "config_yaml": text, "project": "p"})
    assert launched.status_code == 400 and not Run.objects.exists()


def test_a_valid_yaml_config_comes_back_as_every_form_fields_value(alice_client):
    text = "method: dapo\nrollout: {group_size: 6}\n"
    answer = alice_client.post("/runs/launch/check/", {"config_yaml": text}).json()
    assert answer["errors"] == {} and answer["method"] == "dapo"
    assert answer["values"]["rollout.group_size"] == "6" and answer["values"]["filter.name"] == "dynamic-sampling"
    wrong = alice_client.post("/runs/launch/check/", {"config_yaml": "rollout: {group_size: -2}\n"}).json()
    assert set(wrong["errors"]) == {"rollout.group_size"}


def test_the_form_turns_into_the_yaml_it_launches(alice_client):
    page = alice_client.get("/runs/launch/?method=rloo")
    as_yaml = alice_client.post("/runs/launch/yaml/", form_values(page.content.decode())).json()["yaml"]
    assert "method: rloo" in as_yaml
    launched = alice_client.post("/runs/launch/", {"mode": "yaml", "config_yaml": as_yaml, "project": "p"})
    assert launched.status_code == 302 and Run.objects.get().config["method"] == "rloo"


def test_the_launch_form_says_how_long_its_config_would_take_and_follows_edits(alice_client):
    page = alice_client.get("/runs/launch/?method=grpo").content.decode()
    assert re.search(r'id="run-estimate" class="meta">about (\d+ seconds|\d+ minutes?) on 2 CPU cores', page)
    longer = form_values(page) | {"schedule.steps": "20000"}
    answer = alice_client.post("/runs/launch/warnings/", longer).json()
    assert re.match(r"about \d+ (minutes|hours) on 2 CPU cores", answer["estimate"]), answer
    pretrained = form_values(page) | {"model.name": "/models/mine"}
    assert "no estimate" in alice_client.post("/runs/launch/warnings/", pretrained).json()["estimate"]
