"""The TRL integration: a short GRPOTrainer run on CPU streams into a live server and shows on its pages.

The model (the built-in tiny Llama, untrained) and the data set are built here; nothing is downloaded.
"""

import re

import pytest
import requests

from rolloutlab.accounts.models import ApiToken
from rolloutlab.metrics.models import MetricKey, MetricPoint
from rolloutlab.runs.models import Run, Sample
from tests.conftest import small_config

pytestmark = pytest.mark.timeout(600)
STEPS = 3


def digits(prompts, completions, **_):
    """A reward the untrained model earns sometimes: the share of digits in its completion."""
    return [sum(c.isdigit() for c in text) / max(1, len(text)) for text in completions]


def grpo_trainer(output_dir):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from workers.models.tiny import char_tokenizer, tiny_network

    tokenizer = char_tokenizer()
    model = tiny_network(small_config(), len(tokenizer))
    data = Dataset.from_list([{"prompt": f"{a}+{b}="} for a in range(5) for b in range(5)])
    args = GRPOConfig(
        output_dir=str(output_dir), per_device_train_batch_size=8, num_generations=4, max_completion_length=6,
        max_steps=STEPS, logging_steps=1, learning_rate=1e-3, beta=0.0, use_cpu=True, report_to="none",
        save_strategy="no", disable_tqdm=True, seed=0, dataloader_num_workers=0,
    )  # fmt: skip
    return GRPOTrainer(model=model, reward_funcs=[digits], args=args, train_dataset=data, processing_class=tokenizer)


def logged_in(stack, username, password) -> requests.Session:
    session = requests.Session()
    session.get(f"{stack.url}/login/")
    form = {"username": username, "password": password, "csrfmiddlewaretoken": session.cookies["csrftoken"]}
    assert session.post(f"{stack.url}/login/", data=form).url.endswith("/runs/")
    return session


def test_a_grpo_run_streams_its_metrics_and_completions_and_shows_in_the_runs_list(stack, alice, tmp_path):
    from transformers import TrainerCallback

    from rolloutlab_client.integrations.trl import RolloutLabCallback

    _, token = ApiToken.issue(alice, "trl")
    trainer = grpo_trainer(tmp_path)
    logged = {}

    class Record(TrainerCallback):  # what TRL itself logged, to compare with what arrived
        def on_log(self, args, state, control, logs=None, **kwargs):
            logged.setdefault(state.global_step, dict(logs))

    callback = RolloutLabCallback("trl", "grpo-tiny", {"note": "smoke"}, trainer=trainer, url=stack.url, token=token)
    trainer.add_callback(callback)
    trainer.add_callback(Record())
    trainer.train()
    last_completions = list(trainer._logs["completion"])[:16]

    run = Run.objects.get(id=callback.run.id)
    assert (run.kind, run.state, run.name) == ("external", "succeeded", "grpo-tiny")
    assert run.step == run.total_steps == STEPS
    assert run.config["trainer"] == "GRPOTrainer" and run.config["args"]["num_generations"] == 4
    assert run.config["note"] == "smoke"

    def series(name):
        points = MetricPoint.objects.filter(run_id=run.id, key_id=MetricKey.objects.get(name=name).id)
        return list(points.order_by("step").values_list("step", "value"))

    assert series("optim/lr") == [(s, logged[s]["learning_rate"]) for s in range(1, STEPS + 1)]
    assert series("reward/mean") == [(s, logged[s]["reward"]) for s in range(1, STEPS + 1)]
    assert series("reward/digits/mean") == [(s, logged[s]["rewards/digits/mean"]) for s in range(1, STEPS + 1)]
    assert [s for s, _ in series("policy/loss")] == [1, 2, 3] and series("trl/epoch")
    assert any(v > 0 for _, v in series("reward/mean")), "the reward never moved: the test shows nothing"

    # a sample of each step's completions, with the rewards TRL computed for them
    samples = Sample.objects.filter(run_id=run.id)
    assert sorted(set(samples.values_list("step", flat=True))) == [1, 2, 3] and samples.count() == 3 * 8
    last = [s.data for s in samples.filter(step=STEPS).order_by("id")]
    assert [s["completion"] for s in last] == last_completions[:8]
    assert all(s["prompt"].endswith("=") and s["rewards"]["digits"] == s["reward"] for s in last)

    # the pages: the runs list shows it with its reward; its page and samples open
    session = logged_in(stack, "alice", "alice-password")
    listing = session.get(f"{stack.url}/runs/").text
    row = re.search(rf'<tr data-run-id="{run.id}">(.*?)</tr>', listing, re.S).group(1)
    assert "grpo-tiny" in row and "external" in row and "succeeded" in row
    assert f"{run.summary['reward/mean']:.3f}" in row
    assert session.get(f"{stack.url}/runs/{run.id}/").status_code == 200
    shown = session.get(f"{stack.url}/api/runs/{run.id}/samples").json()
    assert shown["step"] == STEPS and [s["completion"] for s in shown["samples"]] == last_completions[:8]


@pytest.mark.parametrize(
    "trl_key, ours",
    [
        ("loss", "policy/loss"),
        ("rewards/correct/std", "reward/correct/std"),
        ("eval_reward", "eval/reward/mean"),
        ("completions/clipped_ratio", "completions/clipped_ratio"),
        ("clip_ratio/region_mean", "trl/clip_ratio/region_mean"),
        ("odd key (v2)", "trl/odd_key__v2_"),
    ],
)
def test_trl_keys_become_valid_metric_names_ours_where_one_exists(trl_key, ours):
    from rolloutlab_client.integrations.trl import metric_name
    from rolloutlab_client.wire import Point

    assert metric_name(trl_key) == ours and Point(name=ours, step=0, value=0.0)
