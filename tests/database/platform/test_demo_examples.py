"""`make demo EXAMPLES=1`: the example runs it queues, the real model's short run among them."""

import pytest

from rolloutlab.execution import services as execution
from rolloutlab.runs.management.commands import demo
from rolloutlab.runs.models import Run

pytestmark = pytest.mark.django_db


def test_the_examples_queue_the_quick_pair_and_a_short_run_of_the_packaged_real_model(monkeypatch, alice):
    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)  # queued, not executed here
    examples = demo.example_runs()  # make install installs the models extra, so the real model is there
    assert [name for name, _ in examples][:2] == ["example grpo", "example mc-grpo"]
    (name, real), *_ = examples[2:]
    assert "smollm2" in name and real["model"]["name"] == "smollm2-135m-instruct"
    assert real["schedule"]["steps"] == demo.SHORT["schedule"]["steps"] and real["model"]["lora_rank"] > 0
    for name, config in examples:
        run = execution.launch_run(alice, config, name=name, tags=["example"])
        assert Run.objects.get(id=run.id).state == "queued"


def test_without_the_packaged_model_the_examples_are_the_quick_pair(monkeypatch):
    def missing(name):
        raise demo.ConfigError(f"'{name}' is not installed", {})

    monkeypatch.setattr(demo, "gguf_file", missing)
    assert [name for name, _ in demo.example_runs()] == ["example grpo", "example mc-grpo"]
