"""RunConfig: the one declarative, validated description of a training run.

It is the seam between the web side and the worker: JSON in Postgres, YAML on
disk, and its JSON Schema drives the launch form, so the `description` of every
field below is also the help text a user reads in the browser.

    cfg = load_config("examples/grpo-arith.yaml", overrides=["seed=7"])
    cfg.config_hash()   # sha256 of the canonical JSON

A *method* is a named preset (a partial RunConfig, see METHODS); the file or
the overrides may change any knob it sets. Resolution order, last wins:
defaults < method preset < YAML file < --set overrides.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model, field_validator, model_validator

from workers.errors import ConfigError
from workers.knobs import Section


class ModelConfig(Section):
    name: str = Field(
        "tiny",
        max_length=4096,
        description="'tiny' for the built-in model, or the path of a local directory holding a "
        "Hugging Face causal LM and its tokenizer (as written by save_pretrained). "
        "Nothing is downloaded. Dropout is turned off in every policy: the sampler and the trainer "
        "must score a completion with the same network, or on-policy ratios are not 1.",
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Parameter dtype of the policy. float32 is required for bit-identical CPU runs."
    )
    hidden_size: int = Field(128, ge=16, le=2048, description="tiny only: width of the network.")
    layers: int = Field(4, ge=1, le=48, description="tiny only: number of transformer blocks.")
    heads: int = Field(4, ge=1, le=64, description="tiny only: attention heads (must divide hidden_size).")
    init_seed: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="tiny only: seed of the initial weights and of the warm-start phase. Kept apart "
        "from the run seed so that runs with different seeds start from the same model.",
    )
    warmup_steps: int = Field(
        250,
        ge=0,
        le=1_000_000,
        description="tiny only: supervised warm-start steps on the task's easier slice (0 = random init).",
    )
    warmup_lr: float = Field(3e-3, gt=0, le=1.0, description="tiny only: learning rate of the warm-start phase.")
    warmup_batch_size: int = Field(64, ge=1, le=4096, description="tiny only: examples per warm-start step.")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelConfig:
        if self.hidden_size % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden_size ({self.hidden_size})")
        return self


class TaskConfig(Section):
    name: Literal["arith", "chain", "countdown", "jsonl", "parquet"] = Field(
        "arith",
        description="arith: integer expressions, answered with the result; chain: the same expressions, "
        "worked one operation at a time (3+4-2=7-2=5), so completions grow with the expression; "
        "countdown: reach a target from given numbers; "
        "jsonl/parquet: question/answer files with GSM8K '#### 42' or \\boxed{42} answers.",
    )
    digits: int = Field(1, ge=1, le=6, description="arith/chain/countdown: the most digits an operand may have.")
    operands: int = Field(
        3, ge=2, le=8, description="arith/chain: the most operands per expression; countdown: numbers given."
    )
    min_operands: int | None = Field(
        None,
        ge=2,
        le=8,
        description="arith/chain: the fewest operands per expression; unset, every expression has "
        "task.operands. With it set, lengths vary from problem to problem (see length_tail).",
    )
    length_tail: float = Field(
        1.0,
        gt=0,
        le=1,
        description="arith/chain with min_operands: P(k operands) is proportional to length_tail^(k - min_operands); "
        "1 draws every count equally often, 0.5 halves the share at each extra operand: a long tail of long "
        "problems (and, for chain, of long completions).",
    )
    shortcut_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="chain: share of the warm-start derivations that skip steps (each intermediate step left out "
        "with probability 1/2), so the warm-started model writes full and shortened derivations of one problem: "
        "lengths vary within a group, and a length-aware method has something to choose from.",
    )
    operators: str = Field(
        "+-", max_length=8, description="arith/chain/countdown: the operators that may appear, from '+-*'."
    )
    warmup_digits: int = Field(
        1,
        ge=1,
        le=6,
        description="arith/chain/countdown: the easier slice the tiny model is warm-started on draws operands "
        "of at most this many digits; a share of full-difficulty problems is mixed in.",
    )
    warmup_operands: int = Field(
        2, ge=2, le=8, description="arith/chain/countdown: operands (numbers) per problem in the easier slice."
    )
    warmup_full_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="arith/chain/countdown: share of full-difficulty problems in the warm-start data.",
    )
    path: str | None = Field(None, max_length=4096, description="jsonl/parquet: the training file.")
    eval_path: str | None = Field(
        None,
        max_length=4096,
        description="jsonl/parquet: a held-out file; without one, eval.size examples of `path` are held out.",
    )
    question_field: str = Field(
        "question", max_length=256, description="jsonl/parquet: the field holding the question."
    )
    answer_field: str = Field("answer", max_length=256, description="jsonl/parquet: the field holding the answer.")

    @field_validator("operators")
    def _known_operators(cls, ops: str) -> str:
        if not ops or set(ops) - set("+-*"):
            raise ValueError(f"'{ops}' must be a non-empty subset of '+-*'")
        return "".join(sorted(set(ops), key="+-*".index))

    @model_validator(mode="after")
    def _file_tasks_need_a_path(self) -> TaskConfig:
        if self.name in ("jsonl", "parquet") and not self.path:
            raise ValueError(f"task '{self.name}' needs task.path, the dataset file")
        return self

    @model_validator(mode="after")
    def _shortcuts_are_chains(self) -> TaskConfig:
        if self.shortcut_share and self.name != "chain":
            raise ValueError(f"task.shortcut_share: task '{self.name}' has no derivation to shorten; only chain has")
        return self

    @model_validator(mode="after")
    def _operand_range(self) -> TaskConfig:
        if self.min_operands is None:
            return self
        if self.name not in ("arith", "chain"):
            raise ValueError(f"task.min_operands: task '{self.name}' has a fixed size; only arith and chain vary it")
        if self.min_operands > self.operands:
            raise ValueError(f"task.min_operands ({self.min_operands}) is above task.operands ({self.operands})")
        return self


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
    # arith, held-out pass@1 0.29 -> 0.56-0.60 in about a minute on 2 CPU cores (tests/engine/test_learning.py)
    prompts_per_step: int = Field(64, ge=1, le=65_536, description="Prompts whose groups make one training batch.")
    max_new_tokens: int = Field(8, ge=1, le=4096, description="Longest completion, in tokens.")
    temperature: float = Field(1.0, gt=0, le=10.0, description="Sampling temperature of training rollouts.")
    top_p: float = Field(
        1.0, gt=0, le=1, description="Nucleus sampling: keep the smallest set of tokens with this mass."
    )
    top_k: int = Field(0, ge=0, le=10_000_000, description="Keep only the k likeliest tokens (0 = all).")


# --------------------------------------------------------------------------- pipeline stages
# Each stage's section is a union of the knob models its components declare (workers/pipeline/<stage>/knobs.py),
# told apart by `name`: a component's knobs exist exactly when it is chosen. Only the declarations are read
# here, never the components' code, so validating a config imports no torch (the web side does it).

STAGE_DEFAULTS = {
    "generate": "iid",
    "filter": "none",
    "control": "fixed",
    "replay": "none",
    "advantage": "group-mean",
    "objective": "token-clip",
}


def _component_knobs(stage: str, registry, name: str) -> type[Section]:
    """The component's own knob model with `name` fixed to it: one member of the stage's union."""
    title = "".join(part.title() for part in f"{stage} {name}".replace("-", " ").split())
    return create_model(
        title,
        __base__=registry.declaration(name).knobs,
        name=(Literal[name], Field(name, description=f"{registry.kind}: {registry.summary(name)}")),
    )


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


def _default(stage: str):
    return lambda: STAGE_KNOBS[stage][STAGE_DEFAULTS[stage]]()


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


class ResourcesConfig(Section):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when a GPU is visible, else CPU.")
    threads: int = Field(
        2, ge=1, le=1024, description="CPU threads torch may use (fixed, so CPU runs are bit-identical)."
    )
    gpus: int = Field(0, ge=0, le=1024, description="GPUs the run needs; >0 routes it to the gpu queue.")
    nodes: int = Field(1, ge=1, le=1024, description="Machines the run spans; with executor ray, more than 1 spreads "
                       "the rollout actors over them.")  # fmt: skip
    executor: Literal["local", "ray"] = Field(
        "local",
        validate_default=True,  # checked against nodes when it is left out too
        description="local: one process trains and samples. ray: a learner and resources.rollout_actors rollout "
        "actors placed on a Ray cluster (RAY_ADDRESS, or a local one), weights sent to them after every update.",
    )
    rollout_actors: int = Field(
        2, ge=1, le=1024, description="With executor ray: actors that sample, each a copy of the policy; a step's "
        "prompts are split between them.",
    )  # fmt: skip
    actor_cpus: float = Field(
        1.0, gt=0, le=1024, description="With executor ray: CPUs each rollout actor reserves (the learner reserves "
        "resources.threads).",
    )  # fmt: skip
    actor_gpus: float = Field(
        0.0, ge=0, le=64, description="With executor ray: GPUs each rollout actor reserves (a fraction shares one).",
    )  # fmt: skip
    learner_gpus: float = Field(
        1.0, gt=0, le=1, description="With executor ray and resources.gpus > 0: the share of a GPU the learner "
        "reserves; below 1 the rollout actors may share its GPU (e.g. 0.5, with two actors of 0.25 each).",
    )  # fmt: skip
    wall_time_s: int | None = Field(
        None, ge=1, le=10 * 365 * 24 * 3600,
        description="Longest the run may take on a worker, in seconds, warm-start included; past it the run is "
        "stopped and fails. Unset: the deployment's ceiling (24 h unless its LIMIT_WALL_TIME_S says otherwise).",
    )  # fmt: skip

    @field_validator("executor")
    @classmethod
    def _several_machines_need_ray(cls, executor: str, info) -> str:
        nodes = info.data.get("nodes", 1)  # validated first: it is declared before
        if nodes > 1 and executor != "ray":
            raise ValueError(
                f"'{executor}' runs on one machine, and nodes is {nodes}: use ray, which places work on them"
            )
        return executor


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
        default_factory=ModelConfig, description="The policy network: the built-in tiny model or a local directory."
    )
    task: TaskConfig = Field(
        default_factory=TaskConfig, description="Where prompts come from and how completions are verified."
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
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig, description="Where the run executes.")

    @model_validator(mode="before")
    @classmethod
    def _stages_name_their_component(cls, raw: Any) -> Any:
        """A stage section given without `name` (`objective: {clip_high: 0.3}`) keeps the default component."""
        if isinstance(raw, dict):
            for stage, default in STAGE_DEFAULTS.items():
                section = raw.get(stage)
                if isinstance(section, dict) and "name" not in section:
                    raw = {**raw, stage: {"name": default, **section}}
        return raw

    @model_validator(mode="after")
    def _components_fit_the_run(self) -> RunConfig:
        """A component whose knobs depend on other sections declares a check of them (`check(cfg)`)."""
        from workers.pipeline import STAGES

        for stage, registry in STAGES.items():
            check = registry.declaration(getattr(self, stage).name).check
            if check is not None:
                check(self)
        return self

    @model_validator(mode="after")
    def _eval_leaves_training_problems(self) -> RunConfig:
        from workers.tasks import problem_space

        space = problem_space(self.task)
        if space is not None and self.eval.size > space // 2:
            raise ValueError(
                f"eval.size: {self.eval.size} held-out problems would leave too few of the task's "
                f"{space} for training; at most {space // 2}"
            )
        return self

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude=NOT_HASHED), sort_keys=True, separators=(",", ":"))

    def config_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def queue(self) -> str:
        """The Celery queue whose workers have what this run needs."""
        if self.resources.executor == "ray":
            return "ray"  # its worker submits the run to a Ray cluster, which has the GPUs
        return "gpu" if self.resources.gpus > 0 else "cpu"


# --------------------------------------------------------------------------- methods
# A method is a partial RunConfig: only the knobs its paper changes. Everything
# else stays at the defaults above, so two methods differ exactly where their
# papers say they do.

METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo": (
        "Group mean/std-normalised advantage, PPO token clip, per-sequence length normalisation (DeepSeekMath).",
        {},
    ),
    "dr-grpo": (
        "GRPO without the std scaling and without per-sequence length normalisation, each batch in 8 minibatch "
        "updates (Understanding R1-Zero).",
        # Liu et al. 2025, sec. 3.2; the schedule is the authors' released recipe (128 prompts x 8 samples per
        # rollout batch, optimizer batches of 128, one epoch: 8 updates per batch, beta = 0). Both corrections act
        # on-policy too; the schedule is theirs so that the card compares like with like.
        {"advantage": {"scale": "none"}, "objective": {"aggregation": "constant"}, "schedule": {"minibatches": 8}},
    ),
    "dapo": (
        "Clip-higher, dynamic sampling of non-degenerate groups, token-level loss, soft overlong penalty, each "
        "batch in 16 minibatch updates (DAPO).",
        # Yu et al. 2025, sec. 4.1 (training details): 512 prompts x 16 samples per rollout step, mini-batches of
        # 512, "16 gradient updates for each rollout step". The clip (eq. 10) acts only on updates after the
        # first of a batch, so without the schedule clip-higher cannot act.
        {
            "objective": {"clip_low": 0.2, "clip_high": 0.28, "aggregation": "token-mean"},
            "schedule": {"minibatches": 16},
            "filter": {"name": "dynamic-sampling", "signal": "correct"},
            "reward": {"weights": {"correct": 1.0, "overlong": 1.0}},
        },
    ),
    "rloo": (
        "Leave-one-out baseline: each sample is compared with the mean of the others (Back to Basics, RLOO).",
        {"advantage": {"name": "leave-one-out", "scale": "none"}, "objective": {"aggregation": "sequence-sum"}},
    ),
    "mc-grpo": (
        "G+1 samples, median baseline scaled by the MAD; the median (pivot) sample is left out of the loss (MC-GRPO).",
        {
            "generate": {"name": "pivot"},
            "advantage": {"name": "group-median", "scale": "mad", "eps": 1e-3, "rescale_nonzero": True},
        },
    ),
    "mopps": (
        "GRPO on the prompts whose Thompson-sampled pass rate is nearest 0.5, from 8x as many candidates (MoPPS).",
        {"control": {"name": "mopps"}},
    ),
    "april": (
        "GRPO whose rollouts are over-provisioned 2x; the step stops once its groups are finished and the unfinished "
        "completions continue in later steps (APRIL).",
        {"generate": {"name": "april"}},
    ),
    "gdro": (
        "GRPO whose prompts are drawn by adversary weights over online pass-rate classes, and whose rollouts move "
        "to the hard classes at a fixed mean group size (Prompt- and Rollout-GDRO).",
        {"control": {"name": "gdro"}},
    ),
    "d3s": (
        "GRPO trained on each group's max-advantage-variance rollouts and their highest |A| x entropy tokens, "
        "a share that relaxes to everything over 200 steps (D3S).",
        {"advantage": {"name": "d3s"}},
    ),
    "rorecomp": (
        "GRPO that trains each group's short-correct and long-incorrect completions first and replays the rest "
        "every second step (RoRecomp).",
        {"replay": {"name": "rorecomp"}},
    ),
    "dots": (
        "GRPO on the prompts of moderate adaptive difficulty, estimated by attention over last step's measured "
        "prompts, with 48 fresh and 16 replayed recent groups a step (DOTS + rollout replay).",
        {
            "control": {"name": "dots"},
            "replay": {"name": "rollout-replay", "groups": 16},
            "rollout": {"prompts_per_step": 48},
        },
    ),
    "duet": (
        "GRPO whose rollouts per prompt follow a posterior surrogate of its reward spread at a fixed total, and "
        "whose rollouts still running at 75% of the length limit are aborted, survivors reweighted (DUET).",
        {"control": {"name": "duet"}},
    ),
    "arrol": (
        "GRPO that starts 2x the rollouts, and after 2 tokens prunes each group to G correctness-balanced "
        "ones by a success head trained online on the policy's hidden states (arrol).",
        {"generate": {"name": "arrol"}},
    ),
    "latr": (
        "GRPO whose groups grow as trees: branch where another token is likely, look 2 tokens ahead, prune "
        "branches that stay alike (LATR).",
        {"generate": {"name": "latr"}},
    ),
    "vade": (
        "GRPO on the prompts with the largest Thompson-sampled reward variance, from a Beta posterior decayed per step "
        "and per visit (VADE).",
        {"control": {"name": "vade"}},
    ),
    "siri": (
        "GRPO with DAPO's clip-higher whose rollout length limit oscillates on a cosine, compress then expand (SIRI).",
        {"control": {"name": "siri"}, "objective": {"clip_low": 0.2, "clip_high": 0.28}},
    ),
    "dars": (
        "GRPO without the std division whose low-accuracy prompts get one stage of extra rollouts, up to the "
        "cumulative advantage of a prompt at accuracy 0.5; merged groups all right or all wrong are dropped "
        "(DARS, equal-treatment schedule).",
        # Yang et al. 2025 and the authors' code (yangzhch6/DARS, ray_dars_trainer.py): one second stage of
        # rollouts, the merged groups whose accuracy is 0 or 1 dropped (dynamic sampling, one round), and every
        # experiment with grpo_use_std=False, which sets both the advantage and the schedule's mass.
        {
            "control": {"name": "dars", "mass": "without-std", "stages": 2},
            "filter": {"name": "dynamic-sampling", "max_rounds": 1},
            "advantage": {"scale": "none"},
        },
    ),
    "xrpo": (
        "Rounds of extra rollouts to the prompts whose mean reward is most uncertain, and GRPO's advantage "
        "amplified for correct but unlikely completions (XRPO, without in-context seeding).",
        {"control": {"name": "xrpo"}, "advantage": {"name": "xrpo"}},
    ),
    "gspo": (
        "Sequence-level importance ratio, clipped per sequence with a narrow range, each batch in 4 minibatch "
        "updates (GSPO).",
        # Zheng et al. 2025, sec. 5.1: "we partition each batch of rollout data into four minibatches for gradient
        # updates". On-policy every sequence ratio is 1 and GSPO's gradient is GRPO's (tests/engine/test_objective.py).
        {"objective": {"name": "sequence-clip", "clip_low": 3e-4, "clip_high": 4e-4}, "schedule": {"minibatches": 4}},
    ),
    "tis": (
        "GRPO whose token losses are weighted by pi_old / pi_sampler, the trainer's recomputed log-probabilities "
        "against the sampler's, truncated at 2 (truncated importance sampling, TIS).",
        # Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training", the TIS
        # correction with C = 2. The weight compares the trainer with the sampler of the same policy, so it acts
        # on every update whatever the schedule. objective.old_logprobs stays auto: it recomputes pi_old wherever
        # the sampler's numerics differ (another dtype or engine), the mismatch TIS corrects.
        {"objective": {"name": "truncated-is", "is_bound": 2.0}},
    ),
    "minpro": (
        "GRPO whose token ratio is replaced by the smallest ratio of the token's prefix, with each batch split "
        "into 4 minibatch updates so that 3 of them are off-policy (MinPRO).",
        # Lei et al. 2026, "A Step Back: Prefix Importance Ratio Stabilizes Policy Optimization": MinPRO is for
        # off-policy updates, where rollouts from an older policy update a newer one (abstract); on-policy every
        # ratio is 1 and MinPRO is GRPO. Several minibatch updates per batch make it act; 4 is the card's choice.
        {"objective": {"name": "min-prefix-ratio"}, "schedule": {"minibatches": 4}},
    ),
    "vcpo": (
        "Two passes over each batch; the second's step is scaled by the ESS of the sequence importance weights "
        "and its advantages get a minimum-variance off-policy baseline (VCPO).",
        # Huang et al. 2026, "Stable Asynchrony: Variance-Controlled Off-Policy RL for LLMs": (i) the learning rate
        # scaled by the ESS, (ii) a closed-form minimum-variance baseline (abstract). The paper's off-policyness is
        # a policy lag; this synchronous trainer gets it by a second pass over the batch, with one minibatch so
        # that each group's baseline sees all of its samples.
        {"objective": {"name": "variance-controlled"}, "schedule": {"updates_per_batch": 2, "minibatches": 1}},
    ),
    "ppo-ewma": (
        "GRPO's clip against a proximal policy that is an average of the policy's recent weights, each token "
        "weighted by the proximal over the sampling policy's probability, the Missing-Old-Logits repair for "
        "asynchronous and replayed rollouts (PPO-EWMA).",
        # Guan et al. 2026, "Missing Old Logits in Asynchronous Agentic RL" (abstract: "we adopt a revised
        # PPO-EWMA method"), on Hilton et al. 2021's PPO-EWMA. It acts whenever the average lags the policy; the
        # regime it is for is the asynchronous trainer's (schedule.max_staleness), which the card's sweep sets.
        {"objective": {"name": "ewma-proximal"}},
    ),
    "fiberpo": (
        "GRPO's token clip gated at two levels, on each completion's length-normalised ratio (GSPO's narrow range) "
        "and on each token's ratio over it (PPO's range), with each batch in 4 minibatch updates (FiberPO).",
        # "Fibration Policy Optimization" (abstract): ratio gating decomposed into a base-level gate on trajectory
        # aggregates and a fiber-level gate on per-token residuals, reducing to the plain objective on-policy. The
        # gates act only off-policy; the abstract fixes no schedule, so 4 minibatch updates is the card's choice.
        {"objective": {"name": "fiber-gate"}, "schedule": {"minibatches": 4}},
    ),
    "gdpo": (
        "Correctness, format and length rewards each normalised within the group on its own, then weighted, "
        "summed and normalised over the batch, so distinct reward combinations keep distinct advantages (GDPO).",
        {"advantage": {"name": "gdpo"}, "reward": {"weights": {"correct": 1.0, "format": 0.5, "length": 0.25}}},
    ),
    "fapo": (
        "GRPO whose correct completions reached by a malformed derivation earn half the reward, so they help "
        "while most of a group is wrong and are penalised once most is right (FAPO).",
        # Flawed-Aware Policy Optimization: a parameter-free penalty for flawed-positive rollouts (abstract);
        # lambda = 1/2 turns a flawed positive's group advantage negative exactly when the fully correct
        # completions outnumber the wrong ones (workers/tasks/rewards.py: FlawedPositive). The paper's detector
        # is a generative reward model; here it is the rule-based malformed-derivation detector.
        {"reward": {"weights": {"correct": 1.0, "flawed-positive": 0.5}, "flaw_detector": "malformed-derivation"}},
    ),
    "ace": (
        "GRPO whose negative advantages grow with the completion's log-likelihood gain over the initial policy, "
        "1 + softplus(log pi/pi_ref), so overconfident errors are pushed down hardest (ACE).",
        {"advantage": {"name": "ace"}},
    ),
    "grpo-lambda": (
        "GRPO with a length penalty that counts only in groups at least half correct; groups below are scored "
        "by correctness alone (GRPO-lambda).",
        # "Stable Reinforcement Learning for Efficient Reasoning" (abstract): a low correctness ratio in the group
        # switches to the length-agnostic 0/1 reward, a high one keeps the length penalty. The threshold 0.5 and
        # the penalty's weight 0.5 are the card's choices; the abstract fixes neither.
        {
            "advantage": {"name": "grpo-lambda", "accuracy_threshold": 0.5, "penalty": "length"},
            "reward": {"weights": {"correct": 1.0, "length": 0.5}},
        },
    ),
    "drpo": (
        "GRPO's correctness advantage; correct completions share theirs by exp(length reward / 0.2) among the "
        "correct ones only, so a long correct completion is never pushed down (DRPO).",
        # "DRPO: Efficient Reasoning via Decoupled Reward Policy Optimization" (abstract): the length signal of
        # correct rollouts is normalised within the positive group, weighted by the closed-form KL-regularised
        # optimal positive distribution (importance weights). lambda = 0.2 and the advantage of a group with no
        # wrong completion (1.0) are the card's choices.
        {
            "advantage": {"name": "drpo", "kl_lambda": 0.2, "preference": "length", "solved_advantage": 1.0},
            "reward": {"weights": {"correct": 1.0, "length": 1.0}},
        },
    ),
    "outcome-explore": (
        "GRPO on rewards plus a UCB bonus for answers the prompt has rarely produced over training and a penalty "
        "for answers repeated within the group, so exploration is counted over final answers (outcome-based "
        "exploration).",
        # "Outcome-based Exploration for LLM Reasoning" (2025), abstract: historical exploration "encourages rarely
        # observed answers via UCB-style bonuses", batch exploration "penalizes within-batch repetition". The
        # abstract gives no coefficients; 0.25 each is this project's choice (docs/methods/outcome-explore.md).
        # No std division: measured, with it the bonuses become full-size advantages in all-wrong groups and
        # the policy learns to invent new wrong answers (pass@1 0.09 against 0.52 without, 3 seeds).
        {"advantage": {"name": "outcome-explore", "history_bonus": 0.25, "batch_penalty": 0.25, "scale": "none"}},
    ),
}


def method_names() -> list[str]:
    return sorted(METHODS)


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Return base with update laid over it; nested dicts merge, everything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def lay_over_preset(preset: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """The user's config over a method preset. A stage whose component the user changes takes none
    of the preset's knobs for that stage: they belong to the component the user replaced."""
    preset = copy.deepcopy(preset)
    for stage in STAGE_DEFAULTS:
        mine, theirs = raw.get(stage), preset.get(stage)
        if isinstance(mine, dict) and isinstance(theirs, dict) and "name" in mine:
            if mine["name"] != theirs.get("name", STAGE_DEFAULTS[stage]):
                del preset[stage]
    return deep_merge(preset, raw)


def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply one `key.path=value` override in place; the value is read as YAML (7, true, 1e-3, [a, b])."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects key.path=value, got '{assignment}'", {"config": "expected key.path=value"})
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    parts = key.strip().split(".")
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            problem = f"'{part}' is not a section: it holds a value, not knobs"
            raise ConfigError(f"--set {key}: {problem}", {key.strip(): problem})
        node = child
    node[parts[-1]] = value


MAX_DEPTH = 16  # how deep a raw config may nest (a section, a knob, a value's own lists and mappings)


def shape_problems(raw: Any) -> dict[str, str]:
    """What keeps `raw` from even having a run config's shape, by field ({} when it has it).

    A mapping of sections; `method` text (or none); every section a mapping of knobs; nothing nested deeper
    than MAX_DEPTH. Checked before anything reads the config (merging, the form, the presets), so a list where a
    section belongs is a message naming the section, never a crash in the code that reads it.
    """
    if not isinstance(raw, dict):
        return {"config": f"a run config is a mapping of sections to knobs, got {_kind(raw)}"}
    problems = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            problems["config"] = f"a section's name is text, got {_kind(key)} {key!r:.40}"
        elif key == "method":
            if value is not None and not isinstance(value, str):
                problems[key] = f"a method is the name of a preset, got {_kind(value)}"
        elif key in RunConfig.model_fields and _is_section(key) and not isinstance(value, dict):
            problems[key] = f"a section is a mapping of knobs (e.g. {key}: {{...}}), got {_kind(value)}"
        elif _depth(value) > MAX_DEPTH:
            problems[key] = f"nested more than {MAX_DEPTH} deep"
    return problems


def _is_section(field: str) -> bool:
    annotation = RunConfig.model_fields[field].annotation
    return field not in ("method", "seed") and annotation not in (int, str, float, bool)


def _depth(value: Any, limit: int = MAX_DEPTH + 1) -> int:
    """How deep `value` nests, counted no further than `limit` (a hostile config may nest thousands deep)."""
    if limit <= 0 or not isinstance(value, (dict, list)):
        return 0
    items = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(item, limit - 1) for item in items), default=0)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", bool: "true/false", type(None): "nothing"}.get(
        type(value), f"a {type(value).__name__}"
    )


def resolve(raw: dict[str, Any]) -> RunConfig:
    """Lay the user's dict over its method's preset and validate the result."""
    problems = shape_problems(raw)
    if problems:
        raise ConfigError("\n".join(f"{where}: {text}" for where, text in problems.items()), problems)
    method = raw.get("method")
    if method is not None:
        if method not in METHODS:
            problem = f"unknown method '{method}'; valid: {', '.join(method_names())}"
            raise ConfigError(f"method: {problem}", {"method": problem})
        raw = lay_over_preset(METHODS[method][1], raw)
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as exc:
        problems = validation_problems(exc)
        message = "\n".join(f"{where}: {text}" if where else text for where, text in problems)
        raise ConfigError(message, {where or "config": text for where, text in problems}) from None


def load_config(path: str | Path | None = None, overrides: list[str] = (), base: dict | None = None) -> RunConfig:
    """Read a YAML run config (or start from `base`), apply --set overrides, resolve and validate."""
    raw: dict[str, Any] = copy.deepcopy(base) if base else {}
    if path is not None:
        raw = deep_merge(raw, read_yaml(Path(path)))
    for assignment in overrides:
        apply_override(raw, assignment)
    return resolve(raw)


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a run config must be a mapping of sections to knobs")
    return data


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) per problem: ("rollout.group_size", "... (got 1)").

    A problem found across sections or fields names its field in the message ("advantage.name: ...",
    "eval.samples: ..."); it is filed under that field.
    """
    problems = []
    for err in exc.errors():
        loc = _without_union_tags(err["loc"])
        where = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            owner = err["loc"][:2] if _without_union_tags(err["loc"]) != tuple(err["loc"]) else None
            prefix = f"not a knob of {owner[0]} '{owner[1]}'" if owner else "unknown knob"
            problems.append((where, f"{prefix}; valid: {', '.join(_valid_keys(err['loc']))}"))
            continue
        if err["type"] in ("union_tag_invalid", "union_tag_not_found") and loc and loc[0] in STAGE_KNOBS:
            problems.append((f"{loc[0]}.name", _unknown_component(loc[0], err.get("input"))))
            continue
        message = err["msg"].removeprefix("Value error, ")
        field, sep, rest = message.partition(": ")
        if sep and "." in field and " " not in field and (not where or field.startswith(where + ".")):
            where, message = field, rest
        got = err.get("input")
        shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
        problems.append((where, f"{message}{shown}"))
    return problems


def _without_union_tags(loc: tuple) -> tuple:
    """("filter", "none", "max_rounds") -> ("filter", "max_rounds"): pydantic names the union member chosen."""
    if len(loc) > 1 and loc[0] in STAGE_KNOBS and loc[1] in STAGE_KNOBS[loc[0]]:
        return (loc[0], *loc[2:])
    return tuple(loc)


def _unknown_component(stage: str, section: Any) -> str:
    from workers.pipeline import STAGES

    registry = STAGES[stage]
    name = section.get("name") if isinstance(section, dict) else None
    return f"unknown {registry.kind} '{name}'; valid: {', '.join(registry.names())}"


def _valid_keys(loc: tuple) -> list[str]:
    """The knobs of the section that holds the unknown key at `loc`."""
    if len(loc) > 2 and loc[0] in STAGE_KNOBS and loc[1] in STAGE_KNOBS[loc[0]]:
        return sorted(STAGE_KNOBS[loc[0]][loc[1]].model_fields)
    model: type[BaseModel] = RunConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        model = annotation
    return sorted(model.model_fields)


def json_schema() -> dict[str, Any]:
    """RunConfig's JSON Schema, with the method presets listed for the launch form."""
    schema = RunConfig.model_json_schema()
    schema["x-methods"] = {name: {"description": d, "preset": p} for name, (d, p) in METHODS.items()}
    schema["x-components"] = {
        stage: {name: {"knobs": sorted(set(model.model_fields) - {"name"})} for name, model in members.items()}
        for stage, members in STAGE_KNOBS.items()
    }
    return schema


@functools.cache
def input_schema() -> dict[str, Any]:
    """The JSON Schema of a run config as a client sends it, self-contained for the API's OpenAPI document.

    RunConfig's schema with every $ref written out in place (the document has no $defs of its own), a stage's
    components as anyOf (a stage given without `name` keeps its preset's or the default component, so more than
    one member may fit) and no discriminator; every section and knob optional, as resolve() lays what is given
    over the method's preset.
    """
    schema = RunConfig.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = inline(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {**target, **{k: inline(v) for k, v in node.items() if k != "$ref"}}
        out = {k: inline(v) for k, v in node.items() if k not in ("discriminator", "required")}
        if "oneOf" in out:
            out["anyOf"] = out.pop("oneOf")
        return out

    return inline(schema)
