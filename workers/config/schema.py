"""The schema of a run config: its sections, the switched sections' unions and RunConfig itself.

The model, the task, the six pipeline stages and the resources are each a union of kinds, chosen by one
knob (SWITCHED_SECTIONS): a kind's knobs exist only when it is chosen. Every field's `description` is also
the help text of the launch form.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, create_model, field_validator, model_validator

from workers.config.legacy import ADDED_KNOBS, ADDED_SECTIONS, FLAT_DEFAULTS
from workers.knobs import Section
from workers.models.packaged import PACKAGED_MODELS
from workers.tasks.knobs import TASKS


def _component_knobs(section: str, registry, name: str) -> type[Section]:
    """A declared component's (or task's) own knob model with `name` fixed to it: one member of the section's union."""
    title = "".join(part.title() for part in f"{section} {name}".replace("-", " ").split())
    return create_model(
        title,
        __base__=registry.declaration(name).knobs,
        name=(Literal[name], Field(name, description=f"{registry.kind}: {registry.summary(name)}")),
    )


# --------------------------------------------------------------------------- sections switched by a knob
# Like the pipeline stages below, the model, task and resources sections are unions of knob models, one per kind,
# told apart by one knob (SWITCHED_SECTIONS): a kind's knobs exist, validate and appear in the launch form exactly
# when it is chosen. Configs written before, when every knob of these sections was there whatever the kind, are
# brought to this shape by workers/config/migrate.py, and hash as they did (workers/config/legacy.py).


class _ModelKnobs(Section):
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Parameter dtype of the policy. float32 is required for bit-identical CPU runs."
    )


class TinyModel(_ModelKnobs):
    name: Literal["tiny"] = Field(
        "tiny",
        description="'tiny' for the built-in model (a small Llama with a character tokenizer, warm-started on the "
        "task), or the path of a local directory holding a Hugging Face causal LM and its tokenizer (as written by "
        "save_pretrained). Nothing is downloaded. Dropout is turned off in every policy: the sampler and the trainer "
        "must score a completion with the same network, or on-policy ratios are not 1.",
    )
    hidden_size: int = Field(128, ge=16, le=2048, description="Width of the network.")
    layers: int = Field(4, ge=1, le=48, description="Number of transformer blocks.")
    heads: int = Field(4, ge=1, le=64, description="Attention heads (must divide hidden_size).")
    init_seed: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="Seed of the initial weights and of the warm-start phase. Kept apart from the run seed so that "
        "runs with different seeds start from the same model.",
    )
    warmup_steps: int = Field(
        250,
        ge=0,
        le=1_000_000,
        description="Supervised warm-start steps on the task's easier slice (0 = random init).",
    )
    warmup_lr: float = Field(3e-3, gt=0, le=1.0, description="Learning rate of the warm-start phase.")
    warmup_batch_size: int = Field(64, ge=1, le=4096, description="Examples per warm-start step.")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TinyModel:
        if self.hidden_size % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden_size ({self.hidden_size})")
        return self


class _PretrainedKnobs(_ModelKnobs):
    """The knobs of a pretrained network (a directory or a packaged model): how it is loaded and trained."""

    lora_rank: int = Field(
        0,
        ge=0,
        le=1024,
        description="LoRA (peft): 0 trains every parameter; above 0, only low-rank adapters of this rank on "
        "lora_target_modules train, and the KL reference is the same network with its adapters disabled (no second "
        "copy in memory). A final checkpoint then holds the adapters only. Adapter dropout is always 0: the sampler "
        "and the trainer must score a completion with the same network.",
    )
    lora_alpha: float = Field(
        32.0, gt=0, le=1e4, description="LoRA scale: the adapters' output is multiplied by lora_alpha / lora_rank."
    )
    lora_target_modules: str = Field(
        "all-linear",
        min_length=1,
        max_length=512,
        pattern=r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$",
        description="The layers that get adapters: 'all-linear' (every linear layer but the output head) or "
        "module names separated by commas (q_proj,v_proj).",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute each layer's activations in the backward pass instead of keeping them: less "
        "memory for a longer step. A checkpointed network keeps no key-value cache while it trains, so each row "
        "forwards its prompt with its completion (the prompt is not shared by its group).",
    )
    attn_implementation: Literal["sdpa", "eager"] = Field(
        "sdpa",
        description="Attention kernel: sdpa (torch's scaled_dot_product_attention) or eager (plain matmuls).",
    )
    autocast: Literal["none", "bfloat16"] = Field(
        "none",
        description="Mixed precision: 'bfloat16' runs every forward of the policy (sampling, evaluation, the update, "
        "the KL reference) under torch.autocast, its matrix products in bf16 while the weights, the optimizer and the "
        "log-softmax stay in dtype. Pays where the hardware has bf16 kernels (CUDA GPUs; CPUs with AMX or "
        "AVX512-BF16) and costs elsewhere. The sampler's log-probabilities then differ from the learner's forward by "
        "rounding, so objective.old_logprobs 'auto' recomputes pi_old with the learner.",
    )


class PretrainedModel(_PretrainedKnobs):
    name: str = Field(
        max_length=4096,
        description="The path of a local directory holding a Hugging Face causal LM and its tokenizer (as written "
        "by save_pretrained), under the deployment's model roots (MODEL_ROOTS); 'tiny' for the built-in model; "
        f"{', '.join(repr(name) for name in PACKAGED_MODELS)} for a model that ships with Rollout Lab. Nothing is "
        "downloaded.",
    )


class PackagedModelKnobs(_PretrainedKnobs):
    name: Literal[tuple(PACKAGED_MODELS)] = Field(  # type: ignore[valid-type]
        description="A model that ships as a Python package: "
        + " ".join(f"'{name}': {packaged.summary}" for name, packaged in PACKAGED_MODELS.items()),
    )


def _model_kind(section: Any) -> str:
    """'tiny' for the built-in model, a packaged model's name, or 'pretrained' for any other name (a directory)."""
    name = section.get("name", "tiny") if isinstance(section, dict) else getattr(section, "name", "tiny")
    return name if name == "tiny" or name in PACKAGED_MODELS else "pretrained"


# model.name -> its knob model; any name not listed is a directory ('pretrained')
MODEL_KINDS = {"tiny": TinyModel, **dict.fromkeys(PACKAGED_MODELS, PackagedModelKnobs), "pretrained": PretrainedModel}
ModelConfig = Annotated[
    Union[tuple(Annotated[model, Tag(kind)] for kind, model in MODEL_KINDS.items())],  # noqa: UP007
    Discriminator(_model_kind),
]


TASK_KINDS = {name: _component_knobs("task", TASKS, name) for name in TASKS.names()}  # task name -> its knob model
TaskConfig = Annotated[Union[tuple(TASK_KINDS.values())], Field(discriminator="name")]  # noqa: UP007


def _environment_kinds() -> dict[str, type[Section]]:
    from workers.environments import ENVIRONMENTS

    return {name: _component_knobs("environment", ENVIRONMENTS, name) for name in ENVIRONMENTS.names()}


ENVIRONMENT_KINDS = _environment_kinds()  # environment name -> its knob model
EnvironmentConfig = Annotated[Union[tuple(ENVIRONMENT_KINDS.values())], Field(discriminator="name")]  # noqa: UP007


class RewardConfig(Section):
    weights: dict[Annotated[str, Field(max_length=64)], Annotated[float, Field(ge=-1e6, le=1e6)]] = Field(
        default_factory=lambda: {"correct": 1.0},
        max_length=16,
        description="Reward functions and their weights; the reward is the weighted sum, and each "
        "function is logged as reward/<name>/mean. Names: correct, format, length, overlong, flawed-positive.",
    )
    flaw_detector: str = Field(
        "malformed-derivation",
        max_length=64,
        description="flawed-positive: the detector that says whether a correct completion's derivation is "
        "flawed (workers/tasks/flaws.py); malformed-derivation flags steps that change nothing (leading zeros, "
        "double negation, parentheses around one number or another pair).",
    )
    overlong_buffer: int = Field(
        4,
        ge=1,
        le=1_000_000,
        description="overlong: completions within this many tokens of max_new_tokens are penalised "
        "linearly, down to -1 at the limit (DAPO's soft overlong punishment).",
    )

    @field_validator("weights")
    def _known_rewards(cls, weights: dict[str, float]) -> dict[str, float]:
        from workers.tasks.rewards import REWARDS

        if not weights:
            raise ValueError("at least one reward function is needed")
        for name in weights:
            if name not in REWARDS:
                raise ValueError(f"unknown reward function '{name}'; valid: {', '.join(REWARDS.names())}")
        return weights

    @field_validator("flaw_detector")
    def _known_detector(cls, name: str) -> str:
        from workers.tasks.flaws import FLAW_DETECTORS

        if name not in FLAW_DETECTORS:
            raise ValueError(f"unknown flaw detector '{name}'; valid: {', '.join(FLAW_DETECTORS.names())}")
        return name


class ChatMessage(Section):
    """One message of a worked example in the prompt."""

    role: Literal["user", "assistant"]
    content: str = Field(..., min_length=1, max_length=4000)


class PromptConfig(Section):
    """How a task's question becomes the text the model reads: as its makers intended for an instruct model (its
    chat template), as it is for the tiny model."""

    format: Literal["auto", "chat", "plain"] = Field(
        "auto",
        description="chat: the user's turn (and the system message) through the tokenizer's chat template, ending "
        "with the assistant's header; a completion ends at the template's end-of-turn token. plain: the text as it "
        "is, after the tokenizer's own start token. auto: chat for a model whose tokenizer has a chat template, "
        "plain for one without (the tiny model).",
    )
    system: str | None = Field(
        None, max_length=8000, description="A system message before the user's turn (chat), or before the text."
    )
    template: str | None = Field(
        None,
        max_length=8000,
        description="The user's turn around the question: {question} is replaced by the task's question and "
        "{instruction} by the answer instruction. Unset: the question, then the instruction after a blank line.",
    )
    instruction: str | None = Field(
        None,
        max_length=2000,
        description="How to give the final answer, e.g. 'Put the final answer after ####.'. Unset: the task's own "
        "for chat prompts (the question/answer files ask for the format of their answers; the generated tasks of "
        "the tiny model for none), none for plain ones. Empty: none.",
    )

    examples: list[Annotated[list[ChatMessage], Field(min_length=2, max_length=16)]] = Field(
        default_factory=list,
        max_length=8,
        description="Worked examples before the question (few-shot), each a conversation of user and assistant "
        "messages that begins with the user and ends with the assistant: through the chat template they are the "
        "conversation's earlier turns, so a multi-turn example (question, tool call, the tool's answer as the user's "
        "message, final answer) shows an environment's format as the episode will be written; as plain text, each "
        "example's messages run together on a line of its own. The template and instruction wrap only the question.",
    )

    @field_validator("examples")
    def _examples_alternate(cls, examples: list[list[ChatMessage]]) -> list[list[ChatMessage]]:
        for number, example in enumerate(examples, 1):
            roles = [message.role for message in example]
            if roles[0] != "user" or roles[-1] != "assistant" or any(a == b for a, b in zip(roles, roles[1:])):
                raise ValueError(
                    f"example {number}: its messages must alternate user, assistant, ... and end with the assistant"
                )
        return examples

    @field_validator("template")
    def _template_holds_the_question(cls, template: str | None) -> str | None:
        if template is not None and "{question}" not in template:
            raise ValueError("the template must contain {question}, where the task's question goes")
        return template


class RolloutConfig(Section):
    backend: Literal["hf", "vllm"] = Field(
        "hf",
        description="hf: batched sampling with a KV cache on torch, CPU or CUDA. vllm: an offline vLLM engine on "
        "the learner's CUDA GPU, asleep during each update (needs pip install -e '.[gpu]'; cannot stop rows early).",
    )
    group_size: int = Field(
        8, ge=2, le=4096, description="G: completions sampled per prompt (at least 2 for a group baseline)."
    )
    # the defaults (64 prompts x 8, two minibatches, 200 steps) are a first run that learns: with the tiny model on
    # arith, held-out pass@1 0.29 -> 0.56-0.60 in about a minute on 2 CPU cores (tests/offline/engine/test_learning.py)
    prompts_per_step: int = Field(64, ge=1, le=65_536, description="Prompts whose groups make one training batch.")
    max_new_tokens: int = Field(8, ge=1, le=4096, description="Longest completion, in tokens.")
    temperature: float = Field(1.0, gt=0, le=10.0, description="Sampling temperature of training rollouts.")
    top_p: float = Field(
        1.0, gt=0, le=1, description="Nucleus sampling: keep the smallest set of tokens with this mass."
    )
    top_k: int = Field(0, ge=0, le=10_000_000, description="Keep only the k likeliest tokens (0 = all).")


# --------------------------------------------------------------------------- pipeline stages
# Each stage's section is a union of the knob models its components declare (each in its folder's
# __init__.py, workers/pipeline/<stage>/<name>/), told apart by `name`: a component's knobs exist exactly
# when it is chosen. Only the declarations are read here, never the components' code, so validating a
# config imports no torch (the web side does it).

STAGE_DEFAULTS = {
    "generate": "iid",
    "filter": "none",
    "control": "fixed",
    "replay": "none",
    "advantage": "group-mean",
    "objective": "token-clip",
}


def _stage_members(stage: str) -> dict[str, type[Section]]:
    from workers.pipeline import STAGES

    registry = STAGES[stage]
    return {name: _component_knobs(stage, registry, name) for name in registry.names()}


STAGE_KNOBS = {stage: _stage_members(stage) for stage in STAGE_DEFAULTS}  # stage -> component name -> knob model


def _stage_union(stage: str):
    """The section's type: one of the stage's knob models, chosen by `name`."""
    return Annotated[Union[tuple(STAGE_KNOBS[stage].values())], Field(discriminator="name")]  # noqa: UP007


GenerateConfig = _stage_union("generate")
FilterConfig = _stage_union("filter")
ControlConfig = _stage_union("control")
ReplayConfig = _stage_union("replay")
AdvantageConfig = _stage_union("advantage")
ObjectiveConfig = _stage_union("objective")


class OptimizerConfig(Section):
    lr: float = Field(2e-4, gt=0, le=1.0, description="AdamW learning rate.")
    weight_decay: float = Field(0.0, ge=0, le=10.0, description="AdamW weight decay.")
    beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1.")
    beta2: float = Field(0.99, ge=0, lt=1, description="AdamW beta2.")
    grad_clip: float = Field(
        1.0, ge=0, le=1e6, description="Clip the gradient's global norm to this (0 = no clipping)."
    )
    warmup_steps: int = Field(
        0,
        ge=0,
        le=1_000_000_000,
        description="Linear learning-rate warm-up, in optimizer steps.",
        json_schema_extra={"acts_when": "within-updates"},
    )
    schedule: Literal["constant", "cosine"] = Field("constant", description="Learning rate after the warm-up.")


class ScheduleConfig(Section):
    steps: int = Field(200, ge=1, le=2**31 - 1, description="RL steps (one batch of rollouts each).")
    time_limit_s: float | None = Field(
        None, gt=0, le=1e9, description="Stop after this many seconds of training, if set."
    )
    rollout_token_budget: int | None = Field(
        None, ge=1, le=10**15,
        description="Stop after the step at which the completion tokens sampled for training (counters/rollout_tokens) "
        "reach this many, if set: methods that spend tokens differently compared at an equal sampling budget. The "
        "final evaluation follows as at any end.",
    )  # fmt: skip
    updates_per_batch: int = Field(
        1, ge=1, le=64, description="Passes over each batch (mu in GRPO; >1 makes the update off-policy)."
    )
    minibatches: int = Field(
        2, ge=1, le=4096, description="Optimizer steps per pass: the batch is split into this many."
    )
    samples_per_step: int = Field(
        16, ge=0, le=1024, description="Rollout samples recorded per step for the sample inspector."
    )
    length_buckets: int = Field(
        1,
        ge=1,
        le=16,
        description="Each training forward splits its rows into at most this many buckets of similar completion "
        "length, each padded only to its own longest: the same log-probabilities and loss, fewer padding positions "
        "computed when lengths have a long tail (up to the rounding of other batch shapes). 1: one forward.",
    )
    micro_batch_tokens: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="Each optimizer step forwards and back-propagates its rows in parts of at most this many "
        "padded tokens (rows x (prompt width + the part's longest completion); a longer row goes alone), so a "
        "step's activation and logit memory is bounded by tokens, not rows. The loss and its gradient are the "
        "one-forward ones (up to rounding), for every objective; the price is a forward without gradient per "
        "optimizer step. 0: one forward per optimizer step.",
    )
    save_every: int = Field(0, ge=0, le=2**31 - 1, description="Save a checkpoint every N steps (0 = only at the end).")
    save_final: bool = Field(True, description="Save a checkpoint when training ends.")
    checkpoint_every: int | None = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="Write a resume checkpoint (weights, optimizer, random streams, data position, every "
        "component's state) every N steps: a run whose worker is lost goes on from the last one, with the same "
        "results. Unset: by model size, every 10 steps below 100M parameters, 25 below 1B, 50 above. 0: never. "
        "Asynchronous runs (max_staleness) write none and start again from step 0.",
    )
    max_staleness: int | None = Field(
        None,
        ge=0,
        le=8,
        description="Asynchronous rollouts. Unset: the synchronous trainer, each step sampled by the policy it "
        "then trains. A number k: a copy of the policy generates in a background thread, up to k steps ahead of "
        "the learner, and gets the learner's weights after each step; every sample carries the version of the "
        "policy that produced it (RL steps trained), and a group holding a sample more than k versions older "
        "than the learner is dropped before the advantage stage (only replayed samples can be: with a replay "
        "component, 0 drops every replayed group). Reports pipeline/async/staleness_mean, staleness_max and "
        "dropped_samples. 0 is the synchronous trainer run through the pipeline: the same metric stream. The "
        "off-policy correction is the objective's: objective.old_logprobs sampler gives PPO's clipped ratio "
        "against the policy that sampled; recompute makes pi_old the learner's, and the truncated-is objective "
        "weighs each token by pi_old / pi_sampler truncated at objective.is_bound.",
    )
    rollout_lag: int | None = Field(
        None,
        ge=0,
        le=8,
        description="Asynchronous runs: how many steps ahead of the learner the rollout thread generates. Unset: "
        "max_staleness, so a fresh batch is as stale as the bound allows. Below it, the difference is room for "
        "rows older than a fresh batch to train: groups generate april carried over from earlier steps (long "
        "episodes), replayed groups.",
    )

    @model_validator(mode="after")
    def _lag_within_the_bound(self) -> ScheduleConfig:
        if self.rollout_lag is not None:
            if self.max_staleness is None:
                raise ValueError("rollout_lag is for asynchronous runs: set max_staleness too")
            if self.rollout_lag > self.max_staleness:
                raise ValueError(
                    f"rollout_lag ({self.rollout_lag}) above max_staleness ({self.max_staleness}): every batch "
                    "would be too stale to train"
                )
        return self


class EvalConfig(Section):
    """pass@1 is greedy (one deterministic completion per prompt); pass@k is the unbiased estimator of
    Chen et al. 2021 (eq. 1) from eval.samples samples per prompt; maj@k votes over disjoint blocks of k."""

    every: int = Field(
        20,
        ge=0,
        le=10_000_000,
        description="Evaluate every N steps, and before the first and after the last (0 = never).",
    )
    size: int = Field(200, ge=1, le=1_000_000, description="Held-out prompts evaluated.")
    k: int = Field(8, ge=1, le=1024, description="The k of eval/pass@k and eval/maj@k.")
    samples: int = Field(
        0,
        ge=0,
        le=1024,
        description="n: samples drawn per prompt to estimate pass@k without bias, 1 - C(n-c, k) / C(n, k) "
        "with c of them correct (Chen et al. 2021), and maj@k as the mean vote over n // k disjoint blocks "
        "of k; 0 = k. More samples, tighter estimates.",
    )
    temperature: float = Field(
        1.0, gt=0, le=10.0, description="Sampling temperature of the n samples (pass@1 is greedy)."
    )

    @model_validator(mode="after")
    def _enough_samples_for_k(self) -> EvalConfig:
        if self.samples and self.samples < self.k:
            raise ValueError(f"eval.samples: {self.samples} samples cannot estimate pass@{self.k}; at least k")
        return self

    @property
    def n(self) -> int:
        """Samples per prompt: eval.samples, or k when it is 0."""
        return self.samples or self.k


class _ResourcesKnobs(Section):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when a GPU is visible, else CPU.")
    threads: int = Field(
        2, ge=1, le=1024, description="CPU threads torch may use (fixed, so CPU runs are bit-identical)."
    )
    gpus: int = Field(0, ge=0, le=1024, description="GPUs the run needs; >0 routes it to the gpu queue.")
    wall_time_s: int | None = Field(
        None, ge=1, le=10 * 365 * 24 * 3600,
        description="Longest the run may take on a worker, in seconds, warm-start included; past it the run is "
        "stopped and fails. Unset: the deployment's ceiling (24 h unless its LIMIT_WALL_TIME_S says otherwise).",
    )  # fmt: skip


def several_machines_need_ray(executor: str, nodes: Any) -> str:
    return f"'{executor}' runs on one machine, and nodes is {nodes}: use ray, which places work on them"


class LocalResources(_ResourcesKnobs):
    executor: Literal["local"] = Field("local", description="executor: one process trains and samples.")

    @model_validator(mode="before")
    @classmethod
    def _several_machines_need_ray(cls, raw: Any) -> Any:
        nodes = raw.get("nodes", 1) if isinstance(raw, dict) else 1
        if isinstance(nodes, int) and nodes > 1:
            raise ValueError(f"resources.executor: {several_machines_need_ray('local', nodes)}")
        return raw


class RayResources(_ResourcesKnobs):
    executor: Literal["ray"] = Field(
        "ray",
        description="executor: a learner and resources.rollout_actors rollout actors placed on a Ray cluster "
        "(RAY_ADDRESS, or a local one), weights sent to them after every update.",
    )
    nodes: int = Field(1, ge=1, le=1024, description="Machines the run spans; more than 1 spreads the rollout "
                       "actors over them.")  # fmt: skip
    rollout_actors: int = Field(
        2, ge=1, le=1024, description="Actors that sample, each a copy of the policy; a step's prompts are split "
        "between them.",
    )  # fmt: skip
    actor_cpus: float = Field(
        1.0, gt=0, le=1024, description="CPUs each rollout actor reserves (the learner reserves resources.threads).",
    )  # fmt: skip
    actor_gpus: float = Field(
        0.0, ge=0, le=64, description="GPUs each rollout actor reserves (a fraction shares one).",
    )  # fmt: skip
    learner_gpus: float = Field(
        1.0, gt=0, le=1, description="With resources.gpus > 0: the share of a GPU the learner reserves; below 1 the "
        "rollout actors may share its GPU (e.g. 0.5, with two actors of 0.25 each).",
    )  # fmt: skip


RESOURCES_KINDS = {"local": LocalResources, "ray": RayResources}  # resources.executor -> its knob model
ResourcesConfig = Annotated[Union[tuple(RESOURCES_KINDS.values())], Field(discriminator="executor")]  # noqa: UP007


@dataclass(frozen=True)
class Switch:
    """How a switched section chooses its kind."""

    knob: str  # the knob whose value is the kind's name: `name`, or resources' `executor`
    default: str  # the kind of a section given without that knob
    other: str | None = None  # the kind of any value that names no kind (a model's directory: 'pretrained')


SWITCHED_SECTIONS = {
    "model": Switch("name", "tiny", other="pretrained"),
    "task": Switch("name", "arith"),
    "environment": Switch("name", "none"),
    **{stage: Switch("name", default) for stage, default in STAGE_DEFAULTS.items()},
    "resources": Switch("executor", "local"),
}
# section -> kind -> its knob model
SECTION_KINDS = {"model": MODEL_KINDS, "task": TASK_KINDS, "environment": ENVIRONMENT_KINDS, **STAGE_KNOBS,
                 "resources": RESOURCES_KINDS}  # fmt: skip


def kind_of(section: str, given: dict) -> str:
    """The kind a raw switched section chooses: `task: {name: chain}` -> chain, `model: {name: /m}` -> pretrained."""
    switch = SWITCHED_SECTIONS[section]
    value = given.get(switch.knob, switch.default)
    if switch.other and not (isinstance(value, str) and value in SECTION_KINDS[section]):
        return switch.other
    return value


def _default(section: str):
    return lambda: SECTION_KINDS[section][SWITCHED_SECTIONS[section].default]()


# Fields that bound how a run is executed without changing what it computes: left out of the config
# hash, so that the hash of a config is the same whatever limit it ran under (and the pinned hashes hold).
NOT_HASHED = {
    "resources": {"wall_time_s", "actor_cpus", "actor_gpus", "learner_gpus", "nodes"},
    "schedule": {"checkpoint_every"},  # when a run saves its state, never what it computes
}


class RunConfig(Section):
    method: str | None = Field(
        None, max_length=64, description="The method preset this config started from (see `methods`)."
    )
    seed: int = Field(
        0, ge=0, le=2**31 - 1, description="Seeds Python, NumPy and torch, the data order and the sampling."
    )
    model: ModelConfig = Field(
        default_factory=_default("model"),
        description="The policy network: the built-in tiny model or a local directory.",
    )
    task: TaskConfig = Field(
        default_factory=_default("task"), description="Where prompts come from and how completions are verified."
    )
    prompt: PromptConfig = Field(
        default_factory=PromptConfig, description="How a question becomes the model's prompt: chat template or plain."
    )
    environment: EnvironmentConfig = Field(
        default_factory=_default("environment"),
        description="What answers the policy's turns in a multi-turn episode (a tool, a puzzle); 'none': one turn.",
    )
    reward: RewardConfig = Field(default_factory=RewardConfig, description="The reward functions and their weights.")
    rollout: RolloutConfig = Field(
        default_factory=RolloutConfig, description="How one completion is sampled, and how many per step."
    )
    generate: GenerateConfig = Field(
        default_factory=_default("generate"), description="Pipeline stage 1: how candidates are produced."
    )
    filter: FilterConfig = Field(
        default_factory=_default("filter"), description="Pipeline stage 2: which groups count."
    )
    control: ControlConfig = Field(
        default_factory=_default("control"), description="Pipeline stage 3: where the rollout budget goes."
    )
    replay: ReplayConfig = Field(
        default_factory=_default("replay"), description="Pipeline stage 4: what is kept and reused."
    )
    advantage: AdvantageConfig = Field(
        default_factory=_default("advantage"), description="The baseline and scale of each sample's advantage."
    )
    objective: ObjectiveConfig = Field(
        default_factory=_default("objective"), description="The policy loss, KL penalty and entropy bonus."
    )
    optimizer: OptimizerConfig = Field(
        default_factory=OptimizerConfig, description="AdamW and its learning-rate schedule."
    )
    schedule: ScheduleConfig = Field(
        default_factory=ScheduleConfig, description="How long to train and how each batch is used."
    )
    eval: EvalConfig = Field(
        default_factory=EvalConfig, description="Held-out evaluation: pass@1 (greedy), pass@k, maj@k."
    )
    resources: ResourcesConfig = Field(default_factory=_default("resources"), description="Where the run executes.")

    @model_validator(mode="before")
    @classmethod
    def _sections_name_their_kind(cls, raw: Any) -> Any:
        """A switched section given without its switch (`objective: {clip_high: 0.3}`, `resources: {gpus: 1}`)
        keeps the default kind."""
        if isinstance(raw, dict):
            for name, switch in SWITCHED_SECTIONS.items():
                section = raw.get(name)
                if isinstance(section, dict) and switch.knob not in section:
                    raw = {**raw, name: {switch.knob: switch.default, **section}}
        return raw

    @model_validator(mode="after")
    def _components_fit_the_run(self) -> RunConfig:
        """A component whose knobs depend on other sections declares a check of them (`check(cfg)`): the pipeline
        stages' components and the environment (which may play only its own task's problems)."""
        from workers.environments import ENVIRONMENTS
        from workers.pipeline import STAGES

        registries = {**STAGES, "environment": ENVIRONMENTS}
        for section, registry in registries.items():
            check = registry.declaration(getattr(self, section).name).check
            if check is not None:
                check(self)
        return self

    @model_validator(mode="after")
    def _vllm_takes_no_adapters(self) -> RunConfig:
        if self.rollout.backend == "vllm" and getattr(self.model, "lora_rank", 0):
            raise ValueError(
                "model.lora_rank: the vllm backend does not load LoRA adapters yet; use rollout.backend 'hf' or "
                "lora_rank 0"
            )
        return self

    @model_validator(mode="after")
    def _chat_needs_a_chat_model(self) -> RunConfig:
        if self.prompt.format == "chat" and self.model.name == "tiny":
            raise ValueError(
                "prompt.format: the tiny model's character tokenizer has no chat template; use 'plain' or 'auto'"
            )
        return self

    @model_validator(mode="after")
    def _eval_leaves_training_problems(self) -> RunConfig:
        space = self.task.problem_space()  # counted from the task's knobs: no task code is imported
        if space is not None and self.eval.size > space // 2:
            raise ValueError(
                f"eval.size: {self.eval.size} held-out problems would leave too few of the task's "
                f"{space} for training; at most {space // 2}"
            )
        return self

    def canonical_json(self) -> str:
        """The JSON the hash is taken of: every knob, sorted; the model, task and resources sections in their flat
        form of before each kind owned its knobs, and the knobs added since only when set (workers/config/legacy.py),
        so that old hashes hold."""
        dumped = self.model_dump(mode="json", exclude=NOT_HASHED)
        for section in ADDED_SECTIONS:  # at their defaults, what a config computed before they existed
            if dumped[section] == type(getattr(self, section))().model_dump(mode="json"):
                del dumped[section]
        for section, added in ADDED_KNOBS.items():
            for knob, before in added.items():
                if knob in dumped.get(section, {}) and dumped[section][knob] == before:
                    del dumped[section][knob]
        for section, flat in FLAT_DEFAULTS.items():
            hashed = {knob: value for knob, value in flat.items() if knob not in NOT_HASHED.get(section, ())}
            dumped[section] = {**hashed, **dumped[section]}
        return json.dumps(dumped, sort_keys=True, separators=(",", ":"))

    def flat(self, section: str) -> dict[str, Any]:
        """A model, task or resources section as every config held it before each kind owned its knobs: the chosen
        kind's knobs over the frozen defaults of the rest (legacy.py). What keys computed then are computed of."""
        return {**FLAT_DEFAULTS[section], **getattr(self, section).model_dump()}

    def config_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def queue(self) -> str:
        """The Celery queue whose workers have what this run needs."""
        if self.resources.executor == "ray":
            return "ray"  # its worker submits the run to a Ray cluster, which has the GPUs
        return "gpu" if self.resources.gpus > 0 else "cpu"
