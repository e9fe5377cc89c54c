"""Pretrained models at launch: model directories lie under MODEL_ROOTS (a refusal names the setting and how to
change it), the launch form's picker lists the saved models there and the packaged ones, and a directory that
lacks what a run needs is refused beside its field, from the browser's form and the API alike."""

from __future__ import annotations

import pytest

from rolloutlab.runs.models import Run
from tests.forms import form_values
from tests.support.chat_models import save_chat_llama
from tests.support.platform_fixtures import SMALL_RUN

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)


@pytest.fixture
def models(tmp_path, settings):
    """A model root holding a chat model, a model without a chat template and one without a tokenizer."""
    root = tmp_path / "models"
    save_chat_llama(root / "chat")
    save_chat_llama(root / "team" / "no-template", chat_template=False)
    save_chat_llama(root / "no-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (root / "no-tokenizer" / name).unlink()
    settings.MODEL_ROOTS = [root]
    return root


def launch_page(client, values: dict):
    form = form_values(client.get("/runs/launch/").content.decode())
    return client.post("/runs/launch/", {**form, **values})


def test_the_model_picker_lists_the_saved_models_under_the_roots_and_the_packaged_ones(alice_client, models):
    page = alice_client.get("/runs/launch/").content.decode()
    picker = page.split('<datalist id="suggest-model.name">')[1].split("</datalist>")[0]
    offered = [option.split('"')[1] for option in picker.split("<option value=")[1:]]
    assert offered == ["tiny", "smollm2-135m-instruct", str(models / "chat"), str(models / "no-tokenizer"),
                       str(models / "team" / "no-template")]  # fmt: skip


def test_a_chat_model_under_the_roots_launches_from_the_form_with_its_path_resolved(alice_client, models):
    response = launch_page(alice_client, {"model.name": "chat", "model.lora_rank": "8", "prompt.system": "Be brief."})
    assert response.status_code == 302, response.content.decode()[:3000]
    config = Run.objects.get().config
    assert config["model"]["name"] == str((models / "chat").resolve()) and config["model"]["lora_rank"] == 8
    assert config["prompt"]["system"] == "Be brief."


def test_a_model_outside_the_roots_is_refused_naming_the_setting_and_how_to_change_it(alice_client, models, tmp_path):
    save_chat_llama(tmp_path / "elsewhere")
    page = launch_page(alice_client, {"model.name": str(tmp_path / "elsewhere")}).content.decode()
    assert "outside this deployment&#x27;s model roots (MODEL_ROOTS: " in page
    assert "adds its folder to MODEL_ROOTS" in page
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    ("model", "prompt_format", "field", "why"),
    [
        ("no-tokenizer", "auto", "model.name", "it holds no tokenizer"),
        ("team/no-template", "chat", "prompt.format", "has no chat template; use &#x27;plain&#x27;"),
    ],
)
def test_a_model_without_what_the_run_needs_is_refused_beside_its_field(
    alice_client, models, model, prompt_format, field, why
):
    page = launch_page(alice_client, {"model.name": model, "prompt.format": prompt_format}).content.decode()
    assert f'data-field="{field}"' in page and why in page
    response = alice_client.post("/api/runs", data={"config": {**SMALL_RUN, "model": {"name": model},
                                 "prompt": {"format": prompt_format}}}, content_type="application/json")  # fmt: skip
    assert response.status_code == 400 and field in response.json()["fields"]
    assert Run.objects.count() == 0


def test_a_model_without_a_chat_template_launches_with_plain_prompts(alice_client, models):
    assert launch_page(alice_client, {"model.name": "team/no-template"}).status_code == 302  # auto: plain


def test_the_launch_form_previews_the_prompt_a_training_example_becomes(alice_client, models):
    form = form_values(alice_client.get("/runs/launch/").content.decode())
    answer = alice_client.post("/runs/launch/warnings/", {**form, "model.name": "chat", "prompt.system": "Be brief."})
    prompt = answer.json()["prompt"]
    assert prompt["rendered"].startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
    assert prompt["rendered"].endswith(f"{prompt['question']}<|im_end|>\n<|im_start|>assistant\n")
    tiny = alice_client.post("/runs/launch/warnings/", form).json()["prompt"]
    assert tiny["rendered"] == tiny["question"]  # the tiny model reads the bare question
    page = alice_client.get("/runs/launch/").content.decode()
    assert '<div id="prompt-preview" class="prompt-preview" hidden>' in page
