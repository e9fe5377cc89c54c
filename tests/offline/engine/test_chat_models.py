"""Pretrained models as their makers meant them to be prompted: a random Llama with a BPE tokenizer and a ChatML
chat template, built inside the test (tests/support/chat_models.py). The chat prompt is the tokenizer's own
rendering, generation ends at the template's end of turn, LoRA trains the adapters alone against the base as its
reference, a LoRA run resumes bit for bit, and a directory that lacks what a run needs is refused by name."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from tests.configs import small_config
from tests.support.chat_models import save_chat_llama
from workers import repro
from workers.errors import ConfigError
from workers.models import check_model_source
from workers.models.adapters import WithoutAdapters
from workers.models.policy import load_policy
from workers.models.preview import prompt_preview
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.rollout import SamplingParams
from workers.rollout.hf import HFBackend
from workers.tasks import build_task
from workers.training import checkpoint
from workers.training.trainer import Trainer

CPU = torch.device("cpu")
QUESTION = "Tom has 3 apples and buys 4 more. How many apples does he have now?"


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    return save_chat_llama(tmp_path_factory.mktemp("models") / "chat-llama")


def chat_config(path, **sections):
    return small_config(model={"name": str(path), **sections.pop("model", {})}, **sections)


def policy_of(cfg):
    return load_policy(cfg, build_task(cfg), CPU)


def test_a_chat_prompt_is_what_the_tokenizers_own_chat_template_makes_of_it(chat_model):
    cfg = chat_config(chat_model, prompt={"system": "You are a careful solver.", "instruction": "Answer after ####."})
    policy = policy_of(cfg)
    messages = [
        {"role": "system", "content": "You are a careful solver."},
        {"role": "user", "content": f"{QUESTION}\n\nAnswer after ####."},
    ]
    template = policy.tokenizer.apply_chat_template
    assert policy.render_prompt(QUESTION) == template(messages, add_generation_prompt=True, tokenize=False)
    assert policy.encode_prompt(QUESTION) == template(messages, add_generation_prompt=True)["input_ids"]
    assert policy.render_prompt(QUESTION).endswith("<|im_start|>assistant\n")


def test_each_stored_sample_keeps_the_prompt_its_model_read_when_it_is_not_the_bare_question(chat_model):
    chat, tiny = MemoryReporter(), MemoryReporter()
    assert Trainer(chat_config(chat_model, schedule={"steps": 1}), chat).run() == "succeeded"
    assert Trainer(small_config(schedule={"steps": 1}), tiny).run() == "succeeded"
    assert all(
        s["rendered_prompt"].endswith(f"{s['prompt']}<|im_end|>\n<|im_start|>assistant\n") for s in chat.sample_rows
    )
    assert chat.sample_rows and not any("rendered_prompt" in s for s in tiny.sample_rows)


CALL_EXAMPLE = [
    {"role": "user", "content": "53*12-17="},
    {"role": "assistant", "content": "<calc>53*12-17</calc>"},
    {"role": "user", "content": "<result>619</result>"},
    {"role": "assistant", "content": "619"},
]


@pytest.mark.parametrize("prompt", [{}, {"system": "Be brief.", "template": "Q: {question}\n{instruction}"},
                                    {"format": "plain", "system": "Be brief."}, {"examples": [CALL_EXAMPLE]},
                                    {"format": "plain", "examples": [CALL_EXAMPLE]}])  # fmt: skip
def test_the_web_sides_preview_renders_the_prompt_the_model_reads(tmp_path, chat_model, prompt):
    rows = [{"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(30)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = chat_config(chat_model, task={"name": "jsonl", "path": str(tmp_path / "train.jsonl")}, eval={"size": 8},
                      prompt=prompt)  # fmt: skip
    preview = prompt_preview(cfg, chat_model)
    assert preview.chat == (prompt.get("format") != "plain")
    assert preview.rendered == policy_of(cfg).render_prompt(preview.question)  # rendered without transformers
    tiny = small_config(prompt={"system": "Be brief."})
    assert prompt_preview(tiny, None).rendered == policy_of(tiny).render_prompt(prompt_preview(tiny, None).question)


def test_a_template_places_the_question_and_plain_prompts_stay_as_they_are(chat_model):
    templated = policy_of(chat_config(chat_model, prompt={"template": "Q: {question}\nRule: {instruction}"}))
    user = templated.render_prompt("1+2=").split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
    assert user == f"Q: 1+2=\nRule: {templated.prompts.instruction}"
    plain = policy_of(chat_config(chat_model, prompt={"format": "plain"}))
    assert plain.render_prompt("1+2=") == "1+2="  # no instruction is added to plain text unless one is given
    tiny = policy_of(small_config())
    assert tiny.render_prompt("1+2=") == "1+2="
    assert tiny.encode_prompt("1+2=") == tiny.tokenizer("1+2=")["input_ids"]


def test_worked_examples_are_the_conversations_earlier_turns_and_a_line_each_in_plain_text(chat_model):
    answer_only = [{"role": "user", "content": "2+2="}, {"role": "assistant", "content": "4"}]
    shown = {"system": "Use the tool.", "instruction": "", "examples": [CALL_EXAMPLE, answer_only]}
    cfg = chat_config(chat_model, prompt=shown)
    policy = policy_of(cfg)
    messages = [{"role": "system", "content": "Use the tool."}, *CALL_EXAMPLE, *answer_only,
                {"role": "user", "content": "1+2="}]  # fmt: skip
    template = policy.tokenizer.apply_chat_template
    assert policy.render_prompt("1+2=") == template(messages, add_generation_prompt=True, tokenize=False)
    # the example's tool answer is written as the environment's observation is: a user message between turns
    observation = policy.tokenizer.decode(policy.prompts.observation_ids("<result>619</result>", turn_closed=False))
    assert f"<calc>53*12-17</calc>{observation}619" in policy.render_prompt("1+2=")
    plain = policy_of(chat_config(chat_model, prompt={"format": "plain", "examples": [CALL_EXAMPLE, answer_only]}))
    assert plain.render_prompt("1+2=") == "53*12-17=<calc>53*12-17</calc><result>619</result>619\n2+2=4\n1+2="
    tiny = policy_of(small_config(prompt={"examples": [answer_only]}))
    assert tiny.render_prompt("1+2=") == "2+2=4\n1+2="


@pytest.mark.parametrize(
    "example, why",
    [
        ([{"role": "assistant", "content": "4"}, {"role": "user", "content": "2+2="}], "example 1: its messages"),
        ([{"role": "user", "content": "2+2="}, {"role": "user", "content": "4"}], "alternate user, assistant"),
        ([{"role": "user", "content": "2+2="}, {"role": "system", "content": "4"}], "user.*assistant"),
        ([{"role": "user", "content": "2+2="}, {"role": "assistant", "content": ""}], "at least 1 character"),
        ([{"role": "user", "content": "2+2="}], "at least 2 items"),
    ],
)
def test_a_worked_example_that_is_not_a_conversation_ending_with_the_assistant_is_refused_by_field(example, why):
    with pytest.raises(ConfigError, match=why) as refused:
        small_config(prompt={"examples": [example]})
    assert any(field.startswith("prompt.examples") for field in refused.value.fields)


def test_the_question_answer_files_ask_a_chat_model_for_their_own_answer_format(tmp_path, chat_model):
    rows = [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(30)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = chat_config(chat_model, task={"name": "jsonl", "path": str(tmp_path / "train.jsonl")}, eval={"size": 8})
    assert "after ####" in policy_of(cfg).render_prompt("What is 2 + 1?")
    boxed = [{**r, "answer": f"so \\boxed{{{i + 1}}}"} for i, r in enumerate(rows)]
    (tmp_path / "boxed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in boxed))
    cfg = chat_config(chat_model, task={"name": "jsonl", "path": str(tmp_path / "boxed.jsonl")}, eval={"size": 8})
    assert "\\boxed{}" in policy_of(cfg).render_prompt("What is 2 + 1?")


def test_generation_ends_at_the_chat_templates_end_of_turn_token(tmp_path):
    # the tokenizer's end of sequence is <|endoftext|>, the template's end of turn <|im_end|> (as in Qwen's models)
    path = save_chat_llama(tmp_path / "m", eos_token="<|endoftext|>")
    chat, plain = (policy_of(chat_config(path, prompt={"format": f})) for f in ("chat", "plain"))
    end_of_turn = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert chat.eos_id == end_of_turn and plain.eos_id == plain.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    lengths = {}
    for name, policy in (("chat", chat), ("plain", plain)):
        head = policy.model.get_output_embeddings()
        boost = head.register_forward_hook(
            lambda module, args, out: out + 30.0 * (torch.arange(out.shape[-1]) == end_of_turn)
        )
        out = HFBackend(policy).generate(
            [policy.encode_prompt(QUESTION)], 4, SamplingParams(6, 1.0), torch.Generator().manual_seed(0)
        )
        boost.remove()
        assert bool((out.tokens[:, 0] == end_of_turn).all())  # the boosted token comes first in every row
        lengths[name] = out.lengths.tolist()
    assert lengths == {"chat": [1, 1, 1, 1], "plain": [6, 6, 6, 6]}  # only the chat prompt's turn ends there


def test_lora_trains_only_the_adapters_and_the_reference_is_the_base_with_them_off(tmp_path, chat_model):
    # a random model's answers are all wrong on most machines' float rounding: the length reward gives every group
    # a spread, so the update has a gradient whatever the samples (on correctness alone it could have none)
    cfg = chat_config(chat_model, model={"lora_rank": 4, "lora_target_modules": "q_proj,v_proj"},
                      objective={"kl_coef": 0.1}, optimizer={"lr": 1e-2},
                      reward={"weights": {"correct": 1.0, "length": 1.0}})  # fmt: skip
    trainer = Trainer(cfg, MemoryReporter())
    model = trainer.policy.model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    assert sum(len(g["params"]) for g in trainer.learner.optimizer.param_groups) == len(trainable)  # no moments else
    assert trainer.run() == "succeeded"
    changed = {name for name, p in model.named_parameters() if not torch.equal(before[name], p)}
    assert changed and changed <= trainable  # the base weights never moved

    base = policy_of(chat_config(chat_model)).model  # the same directory without adapters
    ids = torch.tensor([trainer.policy.encode_prompt(QUESTION)])
    reference = trainer.learner.reference
    assert isinstance(reference, WithoutAdapters)
    assert torch.equal(reference(input_ids=ids).logits, base(input_ids=ids).logits)
    assert not torch.equal(model(input_ids=ids).logits, base(input_ids=ids).logits)  # the adapters do act


def test_a_lora_run_resumed_from_its_checkpoint_reports_what_the_undisturbed_run_reports(tmp_path, chat_model):
    def config():
        schedule = {"steps": 6, "checkpoint_every": 2, "save_final": True}
        return chat_config(chat_model, model={"lora_rank": 4}, objective={"kl_coef": 0.05}, schedule=schedule,
                           eval={"every": 3})  # fmt: skip

    whole, cut = MemoryReporter(), MemoryReporter(stop_after=1 + 3)
    assert Trainer(config(), whole, artifacts_dir=tmp_path / "whole").run() == "succeeded"
    assert Trainer(config(), cut, artifacts_dir=tmp_path / "cut").run() == "cancelled"
    point = checkpoint.latest_checkpoint(tmp_path / "cut")
    saved = checkpoint.read_checkpoint(point, CPU)["model"]
    assert saved and all("lora_" in name for name in saved)  # the base is the run's initial weights: not kept
    resumed = MemoryReporter()
    assert Trainer(config(), resumed, artifacts_dir=tmp_path / "cut").run(resume=point) == "succeeded"
    keep = lambda rows: [{k: v for k, v in r.items() if is_deterministic_metric(k)} for r in rows]  # noqa: E731
    assert keep(resumed.metric_rows) == keep(whole.metric_rows[-len(resumed.metric_rows) :])
    assert resumed.sample_rows == [r for r in whole.sample_rows if r["step"] > point.step]
    final = tmp_path / "whole" / "checkpoints" / "step-6"
    assert (final / "adapter_model.safetensors").is_file() and not (final / "model.safetensors").exists()


def test_a_lora_runs_bundle_reruns_to_the_identical_stream_and_records_its_base_weights(tmp_path, chat_model):
    # Verify for a LoRA run: the bundle's config reruns on the same base model, bit for bit on CPU, and the audit
    # record's weights hash covers the base and the adapters as the run's seed initialized them
    import yaml

    from tests.offline.engine.test_cli import cli
    from workers.bundle import read_bundle

    config = chat_config(chat_model, model={"lora_rank": 4}, objective={"kl_coef": 0.05}, schedule={"steps": 3})
    (tmp_path / "lora.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
    first = cli("run", str(tmp_path / "lora.yaml"), "--out", str(tmp_path / "run"), "--no-progress")
    assert first.returncode == 0, first.stderr
    bundled = cli("bundle", str(tmp_path / "run"), "--out", str(tmp_path / "run.zip"))
    assert bundled.returncode == 0, bundled.stderr
    record = read_bundle(tmp_path / "run.zip").record
    repro.seed_everything(config.seed)  # as the trainer does before it loads the model and adds the adapters
    assert record["initial_weights_sha256"] == policy_of(config).weights_fingerprint()
    assert record["initial_weights_sha256"] != policy_of(chat_config(chat_model)).weights_fingerprint()
    assert record["model_source"] == str(chat_model.resolve())
    again = cli("run", "--from-bundle", str(tmp_path / "run.zip"), "--out", str(tmp_path / "again"), "--no-progress")
    assert again.returncode == 0, again.stderr
    verdict = cli("compare-runs", str(tmp_path / "run"), str(tmp_path / "again"))
    assert verdict.returncode == 0 and verdict.stdout.startswith("identical"), verdict.stdout


def test_a_lora_run_checkpointed_in_token_bounded_micro_batches_trains_as_the_plain_run(chat_model):
    def first_step(**knobs):
        cfg = chat_config(chat_model, model={"lora_rank": 4, **knobs.pop("model", {})}, schedule={"steps": 1, **knobs},
                          objective={"kl_coef": 0.05}, eval={"every": 0})  # fmt: skip
        reporter = MemoryReporter()
        trainer = Trainer(cfg, reporter)
        assert trainer.run() == "succeeded"
        (row,) = [r for r in reporter.metric_rows if "policy/loss" in r]
        return trainer, row

    _, plain = first_step()
    trainer, lean = first_step(model={"gradient_checkpointing": True}, micro_batch_tokens=64)
    assert trainer.policy.model.is_activation_checkpointing and trainer.learner.forwards.one_forward
    assert lean["completions/mean_length"] == plain["completions/mean_length"]  # the same samples
    for name in ("policy/loss", "optim/grad_norm", "policy/kl_ref"):
        assert lean[name] == pytest.approx(plain[name], rel=1e-4, abs=1e-6), name


def test_bf16_autocast_rounds_every_forward_and_makes_the_learner_recompute_pi_old(chat_model):
    # in float32 the sampler's cached decoding and the learner's forward agree to rounding noise; under autocast
    # their bf16 products differ by more, which is why 'auto' recomputes pi_old with the learner
    def first_step(**sections):
        cfg = chat_config(chat_model, schedule={"steps": 1}, eval={"every": 0}, **sections)
        reporter = MemoryReporter()
        trainer = Trainer(cfg, reporter)
        assert trainer.run() == "succeeded"
        (row,) = [r for r in reporter.metric_rows if "policy/loss" in r]
        return trainer, row

    exact, plain = first_step(objective={"old_logprobs": "recompute"})
    trainer, mixed = first_step(model={"autocast": "bfloat16"})
    assert exact.policy.autocast is None and trainer.policy.autocast is torch.bfloat16
    assert trainer.learner.recompute_old_logprobs and trainer.learner.forwards.autocast is torch.bfloat16
    # a random model's logits are small, so bf16's disagreement is small too, but hundreds of times float32's
    # (here about 5e-8 against 1.5e-5)
    assert plain["policy/sampler_logprob_diff"] < 1e-6
    assert 100 * plain["policy/sampler_logprob_diff"] < mixed["policy/sampler_logprob_diff"] < 0.5
    ids = torch.tensor([trainer.policy.encode_prompt(QUESTION)])
    for context in (trainer.policy.computing(), trainer.learner.forwards.computing()):  # the sampler's, the update's
        with context:
            assert trainer.policy.model(input_ids=ids).logits.dtype == torch.bfloat16
    assert exact.policy.model(input_ids=ids).logits.dtype == torch.float32
    assert next(trainer.policy.model.parameters()).dtype == torch.float32  # the weights keep model.dtype
    with pytest.raises(ConfigError, match="model.autocast: not a knob of model 'tiny'"):
        small_config(model={"autocast": "bfloat16"})


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        ("no-config", "no config.json"),
        ("no-tokenizer", "no tokenizer"),
        ("no-eos", "no end-of-sequence token"),
        ("no-template", "no chat template, and prompt.format is 'chat'"),
    ],
)
def test_a_model_directory_without_what_a_run_needs_is_refused_by_name(tmp_path, broken, why):
    path = save_chat_llama(tmp_path / broken, chat_template=broken != "no-template", eos=broken != "no-eos")
    if broken == "no-config":
        (path / "config.json").unlink()
    if broken == "no-tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (path / name).unlink()
    cfg = chat_config(path, prompt={"format": "chat"})
    with pytest.raises(ConfigError, match=f"model.name: '{path}' cannot be used: .*{why}"):
        check_model_source(cfg)
    (tmp_path / "run.yaml").write_text(json.dumps(cfg.model_dump(mode="json")))
    command = [sys.executable, "-m", "workers", "run", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "o")]
    cli = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and why in cli.stderr and "Traceback" not in cli.stderr
    assert not (tmp_path / "o").exists()


def test_the_tiny_model_cannot_be_prompted_as_chat():
    with pytest.raises(ConfigError, match="prompt.format: the tiny model's character tokenizer has no chat template"):
        small_config(prompt={"format": "chat"})


def test_the_prompt_section_and_the_pretrained_knobs_at_their_defaults_leave_every_config_hash_as_it_was(chat_model):
    cfg = small_config()
    assert "prompt" not in json.loads(cfg.canonical_json())
    assert small_config(prompt={"system": "Be brief."}).config_hash() != cfg.config_hash()
    assert "examples" not in json.loads(small_config(prompt={"system": "Be brief."}).canonical_json())["prompt"]
    worked = [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]
    assert small_config(prompt={"examples": [worked]}).config_hash() != cfg.config_hash()
    pretrained = chat_config(chat_model)
    assert "lora_rank" not in json.loads(pretrained.canonical_json())["model"]
    assert chat_config(chat_model, model={"lora_rank": 8}).config_hash() != pretrained.config_hash()
    assert "gradient_checkpointing" not in json.loads(pretrained.canonical_json())["model"]
    assert "autocast" not in json.loads(pretrained.canonical_json())["model"]
    assert chat_config(chat_model, model={"autocast": "bfloat16"}).config_hash() != pretrained.config_hash()
    assert "micro_batch_tokens" not in json.loads(cfg.canonical_json())["schedule"]
    lean = chat_config(chat_model, model={"gradient_checkpointing": True}, schedule={"micro_batch_tokens": 512})
    assert lean.config_hash() != pretrained.config_hash()
