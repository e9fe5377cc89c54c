"""The RL loop of every GRPO-family method, one function per phase.

    trainer = Trainer(cfg, reporter, artifacts_dir=Path("runs/demo"))
    trainer.run()   # -> "succeeded" | "cancelled"

One step:  collect (generate -> reward -> [more rollout stages, if the control
stage extends the scored groups] -> filter, repeated while the filter asks for
more; the control stage sees every group) -> replay.mix -> advantage -> update
(objective) -> replay.store -> sync -> evaluate -> report. Collect is two parts:
gather (the rollout stages) and commit (the trainer's shared state sees the step), so
that the asynchronous trainer (schedule.max_staleness, workers/asynchronous.py) can
gather in a rollout thread while the learner trains and commit at its barrier.

Which components fill the stages comes from the config; this file never
asks which method it is running.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import yaml

from workers import checkpoint, progress, repro, stopping
from workers import metrics as metric
from workers.evaluation import score_eval
from workers.models.policy import load_policy
from workers.packing import length_buckets
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.history import PromptHistory
from workers.pipeline.objective.base import KL_ESTIMATORS, aggregator, k3_kl, off_policy_stats
from workers.pipeline.stages import LossInputs, StageContext, build_stages
from workers.reporting import Reporter
from workers.rollout import SamplingParams, build_backend
from workers.rollout.hf import left_pad
from workers.system import SystemSampler
from workers.tasks import build_task
from workers.tasks.rewards import Completion, build_rewards


@dataclass
class Gathered:
    """What one step's rollout stages produced, before the trainer's shared state has seen it (Trainer.commit)."""

    step: int
    batch: RolloutBatch  # the groups the filter kept
    generated: RolloutBatch  # every group sampled, kept or dropped
    wanted: int  # the groups the control stage planned
    rounds: int
    generate_s: float
    reward_s: float


@dataclass
class Collected:
    """What one step's collect phase produced."""

    batch: RolloutBatch  # the groups that go on to training
    generated: RolloutBatch  # every group sampled this step, kept or dropped
    rounds: int
    missing_groups: int  # groups the filter could not fill within its rounds
    generate_s: float
    reward_s: float
    # the prompt history's metrics and the collecting stages' own, as they were once the step's groups were seen:
    # the asynchronous trainer reports a batch some steps after it was collected
    observed: dict[str, float] = field(default_factory=dict)
    # the samples stored for the inspector, described by the learner around its update (Trainer.inspect_samples)
    described: list[dict] | None = None


# the stages that run while rollouts are collected (by the rollout thread, in the asynchronous trainer); the others
# run in the learner
COLLECT_STAGES = ("generate", "filter", "control")


# decimals of the per-token log-probabilities and entropies stored with each sample
SAMPLE_DIGITS = 4


def whole_groups(batch: RolloutBatch, groups, budget: int) -> list[int]:
    """The rows of `groups`, whole groups in order, while they fit in `budget` rows (the first one cut to fit)."""
    rows: list[int] = []
    for g in groups:
        members = batch.rows_of([g])
        if rows and len(rows) + len(members) > budget:
            break
        rows += members[: budget - len(rows)]
        if len(rows) >= budget:
            break
    return rows


def token_entropy(logp_all: torch.Tensor) -> torch.Tensor:
    """The entropy (nats) of each position's next-token distribution, from its log-probabilities: (..., V) -> (...)."""
    return -(logp_all.exp() * logp_all).sum(-1)


class UpdateEntropies:
    """Per-token entropies (nats) of stored samples under the policy before the update, read off the update's
    forwards where it runs them anyway (Trainer.update says which).

    Only rows the update sees as they were sampled may be asked for: in the loss, every token attended
    (Trainer.inspect_samples). A forward records the rows it holds that it wants and has not recorded yet.
    """

    def __init__(self, samples: dict[int, dict]):
        self.samples = samples  # row of the trained batch -> its sample (Trainer.describe_sample), to fill in
        self.wanted: dict[int, int] = {}  # row of the update's inputs -> row of the batch (set by Trainer.update)
        self.found: dict[int, torch.Tensor] = {}  # row of the batch -> (T,) entropies

    def locate(self, rows: torch.Tensor) -> None:
        """`rows` (B,): the batch row that each row of the update's inputs holds."""
        self.wanted = {i: row for i, row in enumerate(rows.tolist()) if row in self.samples}

    @torch.no_grad()
    def take(self, chunk: torch.Tensor | None, logp_all: torch.Tensor, entropy: torch.Tensor | None) -> None:
        """Record the wanted rows, not recorded yet, of one forward over `chunk` (rows of the update's inputs; None:
        all of them): `logp_all` (B, T, V) its log-probabilities, `entropy` (B, T) if the forward computed it."""
        rows = range(len(logp_all)) if chunk is None else chunk.tolist()
        new = [(i, self.wanted[r]) for i, r in enumerate(rows) if r in self.wanted and self.wanted[r] not in self.found]
        if not new:
            return
        at = torch.tensor([i for i, _ in new], device=logp_all.device)
        values = entropy.detach()[at] if entropy is not None else token_entropy(logp_all[at])  # (R, T)
        self.found.update(zip((row for _, row in new), values.cpu()))

    def fill(self) -> None:
        """Each sample's "entropies", once the update ran: one per completion token, rounded for storage."""
        for row, sample in self.samples.items():
            sample["entropies"] = rounded(self.found[row][: sample["length"]])


def rounded(values: torch.Tensor) -> list[float]:
    """Per-token values as stored with a sample (log-probabilities, entropies)."""
    return [round(v, SAMPLE_DIGITS) for v in values.tolist()]


def resolve_device(wanted: str) -> torch.device:
    if wanted == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if wanted == "cuda" and not torch.cuda.is_available():
        from workers.errors import ConfigError

        raise ConfigError("resources.device: 'cuda' was asked for but no CUDA GPU is visible")
    return torch.device(wanted)


# a need a component may declare (Declaration.needs) -> the Trainer method that fills it into the batch
PROVIDERS = {"ref_logprobs": "fill_ref_logprobs", "answer_counts": "fill_answer_counts"}


def declared_needs(cfg) -> set[str]:
    """What the config's components declare they read beyond a scored batch (Declaration.needs)."""
    from workers.pipeline import STAGES

    return {need for stage, registry in STAGES.items() for need in registry.declaration(getattr(cfg, stage).name).needs}


def recomputes_old_logprobs(cfg) -> bool:
    """objective.old_logprobs, with auto resolved: recompute unless a float32 policy samples itself (`hf`)."""
    choice = cfg.objective.old_logprobs
    if choice == "auto":  # rollout actors sample from copies, whose log-probabilities show whether the sync worked
        return cfg.model.dtype != "float32" or cfg.rollout.backend != "hf" or cfg.resources.executor != "local"
    return choice == "recompute"


class Trainer:
    def __init__(self, cfg, reporter: Reporter, artifacts_dir: Path | None = None, task=None, samplers=None):
        """samplers: where training rollouts are sampled, a function of the policy to sample from that returns its
        RolloutBackend (workers.distributed's rollout actors); None: this process, through the run's backend."""
        self.cfg, self.reporter, self.artifacts_dir = cfg, reporter, artifacts_dir
        stopping.install(reporter.should_stop)  # from here on every long loop of this thread obeys a stop
        progress.install(reporter)  # ... and reports how far it got (the warm-up, an evaluation)
        self.device = resolve_device(cfg.resources.device)
        repro.seed_everything(cfg.seed)
        self.determinism = repro.determinism_record(self.device, cfg.resources.threads)
        if task is None:
            with progress.phase("loading the dataset"):
                task = build_task(cfg)
        self.task = task
        with self.deterministic(), progress.phase("loading the model"):
            self.policy = load_policy(cfg, self.task, self.device)
        repro.seed_everything(cfg.seed)  # building the tiny model consumed global RNG draws
        # this process's backend, which evaluates and samples; none where `samplers` (rollout actors) do both, so
        # that a learner on Ray starts no inference engine of its own
        self.backend = build_backend(cfg.rollout.backend, self.policy) if samplers is None else None
        self.samplers = samplers
        self._sampler = None
        self.rollout_backend = None  # the asynchronous trainer's rollout copy's sampler (workers/asynchronous.py)
        self.backend_stale = False  # True: the learner's weights changed since `backend` last had them
        self.rewards = build_rewards(self.task, cfg)
        self.stages = build_stages(cfg)
        self.optimizer = torch.optim.AdamW(
            self.policy.model.parameters(),
            lr=cfg.optimizer.lr,
            betas=(cfg.optimizer.beta1, cfg.optimizer.beta2),
            weight_decay=cfg.optimizer.weight_decay,
        )
        self.recompute_old_logprobs = recomputes_old_logprobs(cfg)
        parameters = sum(p.numel() for p in self.policy.model.parameters())  # counted once, not every step
        self.checkpoint_every = checkpoint.checkpoint_interval(cfg.schedule.checkpoint_every, parameters)
        self.history = PromptHistory()
        self.needs = declared_needs(cfg)  # what the chosen components read that is computed only when asked
        self.reference = self.frozen_copy() if cfg.objective.kl_coef > 0 or "ref_logprobs" in self.needs else None
        # separate streams, so that e.g. evaluating more often never changes the training samples
        self.data_rng = np.random.default_rng(cfg.seed)
        self.sampling_rng = torch.Generator(self.device).manual_seed(cfg.seed)
        self.shuffle_rng = torch.Generator().manual_seed(cfg.seed + 1)
        self.counters = {metric.ROLLOUT_TOKENS: 0.0, metric.SAMPLES: 0.0, metric.WALL_S: 0.0}
        self.data_stream = repro.DataStream()  # every training example drawn, in order: the exact data used
        self.system = SystemSampler(self.device)  # what each step cost the machine
        self.environment: dict | None = None

    # ------------------------------------------------------------------ set-up helpers
    def updates_per_step(self) -> int:
        """Optimizer steps the schedule plans per RL step: passes x minibatches."""
        return self.cfg.schedule.updates_per_batch * self.cfg.schedule.minibatches

    def lr_factor(self, update: int) -> float:
        o = self.cfg.optimizer
        total = self.cfg.schedule.steps * self.updates_per_step()
        if update < o.warmup_steps:
            return (update + 1) / o.warmup_steps
        if o.schedule == "cosine":
            progress = (update - o.warmup_steps) / max(1, total - o.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    def frozen_copy(self) -> torch.nn.Module:
        reference = copy.deepcopy(self.policy.model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        return reference

    def sampler_for(self, policy):
        """A backend that samples training rollouts from `policy` (the asynchronous trainer's rollout copy)."""
        return self.samplers(policy) if self.samplers else build_backend(self.cfg.rollout.backend, policy)

    @property
    def sampler(self):
        """The backend that samples the synchronous trainer's rollouts: the run's own, or made on first use by
        `samplers` (the asynchronous trainer never uses it, so it places no rollout actors for it)."""
        if self._sampler is None:
            self._sampler = self.sampler_for(self.policy) if self.samplers else self.current_backend()
        return self._sampler

    def own_backends(self) -> list:
        """The backends of the learner's policy made so far: its own (none on Ray), and its sampler when another."""
        own = [self.backend] if self.backend is not None else []
        if self._sampler is not None and self._sampler is not self.backend:
            own.append(self._sampler)
        return own

    def sync_samplers(self) -> None:
        """The backend that samples the learner's policy uses its current weights from now on (one not made yet
        needs none). The run's own backend, where it only evaluates (the asynchronous trainer's copy samples),
        gets them when it next evaluates (current_backend): a vllm engine there would otherwise wake and load
        weights after every step, for an evaluation every eval.every steps."""
        if self._sampler is not None:
            self._sampler.sync_weights()
        self.backend_stale = self._sampler is not self.backend

    def current_backend(self):
        """The run's own backend, holding the learner's current weights (after a resume too)."""
        if self.backend_stale:
            self.backend.sync_weights()
            self.backend_stale = False
        return self.backend

    def evaluator(self):
        """Where evaluation samples: the run's own backend; with `samplers`, the rollout actors that sample the
        training rollouts (the asynchronous trainer's copy's, when there is one), which hold the learner's weights
        whenever it evaluates: before the first step, and after every step's weight sync."""
        if self.samplers is None:
            return self.current_backend()
        return self.rollout_backend or self.sampler

    def check_stop(self) -> None:
        stopping.checkpoint()

    def deterministic(self):
        """The block in which the trainer's torch work runs: deterministic kernels, resources.threads threads."""
        return repro.deterministic(self.device, self.cfg.resources.threads)

    # ------------------------------------------------------------------ the run
    def run(self, resume: checkpoint.ResumePoint | None = None) -> str:
        """Train for schedule.steps (or until the time limit or a stop); return the final state.

        resume: a checkpoint of this run (workers.checkpoint.latest_checkpoint): train from the step after it, with
        every state it saved, so the steps it reports are those the undisturbed run reports."""
        with self.deterministic():
            done = self.restore(resume) if resume is not None else 0
            return self.run_steps(done)

    def run_steps(self, done: int = 0) -> str:
        """The steps after step `done` (0: the whole run, the evaluation before any training included)."""
        about = f"{self.cfg.method or 'custom'} on {self.cfg.task.name}, device {self.device}"
        self.reporter.status("running", about + (f", resumed after step {done}" if done else ""))
        self.record_environment()
        # the time limit counts the training time before the resume too
        started, last_step = time.perf_counter() - self.counters[metric.WALL_S], done
        try:
            # closed on a break: the asynchronous producer is joined. Made before the first evaluation: the
            # asynchronous trainer's rollout copy, on Ray, is where that evaluation samples (evaluator)
            with closing(self.steps(done + 1)) as steps:
                if self.cfg.eval.every and not done:
                    self.reporter.metrics(0, self.evaluate(0))
                with self.training_phase() as training:
                    training.advance(done)
                    for step, metrics in steps:
                        training.advance()
                        self.reporter.metrics(step, metrics)
                        last_step = step
                        if self.after_step(step, started):
                            break
        except stopping.Cancelled:
            self.record_data_stream()
            self.reporter.status("cancelled", f"stopped after step {last_step}")
            return "cancelled"
        self.finish(last_step)
        self.record_data_stream()
        self.reporter.status("succeeded", f"{last_step} steps")
        return "succeeded"

    def after_step(self, step: int, started: float) -> bool:
        """The checkpoints due after step `step`; whether the time limit (counted from `started`) is reached."""
        if self.cfg.schedule.save_every and step % self.cfg.schedule.save_every == 0:
            self.save_checkpoint(step)
        if self.resume_checkpoint_due(step):
            self.write_resume_checkpoint(step)
        limit = self.cfg.schedule.time_limit_s
        if limit and time.perf_counter() - started > limit:
            self.reporter.log(f"time limit of {limit:g}s reached after step {step}")
            return True
        return False

    def training_phase(self):
        """The steps as a phase: the state line says how many are done (each step's metrics are its log)."""
        return progress.phase("training", total=self.cfg.schedule.steps, unit="steps", log_every_s=None)

    def steps(self, first: int = 1) -> Iterator[tuple[int, dict[str, float]]]:
        """Every step's number and metrics from step `first`, in order: one at a time, or pipelined when
        schedule.max_staleness is set (which writes no resume checkpoint, so always starts at 1)."""
        if self.cfg.schedule.max_staleness is None:
            return self.synchronous_steps(first)
        from workers.asynchronous import Pipeline

        return Pipeline(self).steps()

    def synchronous_steps(self, first: int = 1) -> Iterator[tuple[int, dict[str, float]]]:
        for step in range(first, self.cfg.schedule.steps + 1):
            self.check_stop()
            yield step, self.step(step)

    def finish(self, last_step: int) -> None:
        """Final evaluation (unless the last step just did one) and the final checkpoint."""
        every = self.cfg.eval.every
        if every and last_step % every != 0:
            self.reporter.metrics(last_step, self.evaluate(last_step))
        if self.cfg.schedule.save_final:
            self.save_checkpoint(last_step)

    def record_environment(self) -> None:
        self.environment = repro.capture_environment(
            self.cfg,
            dataset_fingerprint=self.task.fingerprint(),
            weights_fingerprint=self.policy.weights_fingerprint(),
            determinism=self.determinism,
        )
        self.environment["model_source"] = self.policy.source
        if self.artifacts_dir is not None:
            Path(self.artifacts_dir).mkdir(parents=True, exist_ok=True)
            path = Path(self.artifacts_dir) / "environment.json"
            path.write_text(json.dumps(self.environment, indent=1))
            self.reporter.artifact(str(path), "environment")

    def record_data_stream(self) -> None:
        """The fingerprint of the exact training examples this run drew, written once it has drawn them all."""
        if self.artifacts_dir is None:
            return
        path = Path(self.artifacts_dir) / "data_stream.json"
        path.write_text(json.dumps({"sha256": self.data_stream.hexdigest(), "examples": self.data_stream.examples}))
        self.reporter.artifact(str(path), "data-stream")

    def step(self, step: int) -> dict[str, float]:
        """One RL step: collect, score, train, sync; and the evaluation when it falls due. Always the synchronous
        step: the asynchronous trainer's steps overlap one another (Trainer.steps, workers/asynchronous.py)."""
        with self.deterministic():
            return self.train_step(step)

    def train_step(self, step: int) -> dict[str, float]:
        began = time.perf_counter()
        collected = self.collect(step)
        self.check_stop()
        metrics, batch, train_s = self.learn(step, collected)
        synced = time.perf_counter()
        self.sync_samplers()
        return self.finish_step(step, began, collected, batch, metrics, train_s, time.perf_counter() - synced)

    def learn(self, step: int, collected: Collected, bound=None) -> tuple[dict[str, float], RolloutBatch, float]:
        """replay.mix -> advantage -> update -> replay.store, on a collected batch; the metrics, the trained batch
        and the seconds the update took.

        `bound` (workers.asynchronous.StalenessBound), in the asynchronous trainer, drops the groups too stale for
        the loss before the advantage stage and reports the staleness of what trains. The learner's version at
        step `step` is step - 1 (the RL steps it has completed).
        """
        batch = self.stages.replay.mix(collected.batch, step)
        metrics = self.batch_metrics(collected)
        if bound is not None:
            batch = bound.admit(batch, step - 1)
        train_s = 0.0
        if batch.num_groups:
            advantage_stats = self.compute_advantages(batch)
            metrics.update({**self.advantage_metrics(batch), **advantage_stats})
            inspected = None
            if self.cfg.schedule.samples_per_step:  # described now, before the update; entropies from the update
                collected.described, inspected = self.inspect_samples(batch, collected.generated)
            self.check_stop()
            for backend in self.own_backends():  # a sampler sharing the GPU frees it for the update (vllm sleeps)
                backend.release_memory()
            began_update = time.perf_counter()
            metrics.update(self.update(batch, step, inspected))
            train_s = time.perf_counter() - began_update
            if inspected is not None:
                inspected.fill()
            self.stages.replay.store(batch, step)
        if bound is not None:
            metrics.update(bound.metrics(batch, step - 1))
        return metrics, batch, train_s

    def finish_step(
        self, step: int, began: float, collected: Collected, batch: RolloutBatch, metrics: dict, train_s: float,
        sync_s: float,
    ) -> dict[str, float]:  # fmt: skip
        """The step's timings, counters and samples; and the evaluation when it falls due."""
        step_s = time.perf_counter() - began
        self.counters[metric.WALL_S] += step_s
        metrics.update(
            {
                metric.GENERATE_S: collected.generate_s,
                metric.REWARD_S: collected.reward_s,
                metric.TRAIN_S: train_s,
                metric.SYNC_S: sync_s,
                metric.STEP_S: step_s,
                metric.ROLLOUT_TOKENS_PER_S: collected.generated.decoded / collected.generate_s,
                **self.counters,
                **self.system_metrics(),
            }
        )
        self.reporter.groups(step, self.group_outcomes(collected.generated))
        described = collected.described  # taken before the update, or (nothing trained) now
        self.reporter.samples(
            step, described if described is not None else self.pick_samples(batch, collected.generated)
        )
        if self.cfg.eval.every and step % self.cfg.eval.every == 0:
            self.check_stop()
            metrics.update(self.evaluate(step))
        return metrics

    # ------------------------------------------------------------------ phase: collect
    def collect(self, step: int) -> Collected:
        """generate -> reward -> filter, for as many rounds as the filter allows, until the batch is full; then
        the trainer's shared state sees the step's groups (gather, then commit)."""
        return self.commit(self.gather(step, self.policy, self.sampler, version=step - 1))

    def gather(self, step: int, policy, backend, version: int) -> Gathered:
        """The rollout stages of a step, sampled by `policy` (of version `version`) through `backend`.

        The control stage plans the step, then sets each round's prompts' budget, and may grow the
        round's scored groups in further rollout stages before the filter sees them. This part reads
        the prompt history and the components' state but writes none of the trainer's own state (its
        data and sampling streams aside), so the asynchronous trainer runs it in its rollout thread
        while the learner trains; `commit` then records the step in the main thread.
        """
        ctx = self.stage_context(step, policy, backend, version)
        budget = self.stages.control.plan(ctx)

        def draw(count: int):
            """`count` prompts chosen by the control stage from the drawn candidates, and their budget."""
            candidates = self.task.train_batch(budget.candidates_for(count), self.data_rng)
            examples = self.stages.control.select(ctx, candidates, count)
            self.note_examples(examples)
            return examples, self.stages.control.allocate(ctx, examples, budget)

        ctx.draw = draw
        kept, generated, generate_s, reward_s, rounds = [], [], 0.0, 0.0, 0
        while rounds < self.stages.filter.max_rounds and sum(b.num_groups for b in kept) < budget.prompts:
            rounds += 1
            examples, granted = draw(budget.prompts - sum(b.num_groups for b in kept))
            t = time.perf_counter()
            batch = self.generate(ctx, examples, granted)
            generate_s += time.perf_counter() - t
            t = time.perf_counter()
            self.score(batch)
            reward_s += time.perf_counter() - t
            batch, more_generate_s, more_reward_s = self.extend(ctx, batch, granted)
            generate_s, reward_s = generate_s + more_generate_s, reward_s + more_reward_s
            kept.append(batch.select_groups(self.stages.filter(batch, ctx)))
            generated.append(batch)
            self.check_stop()
        everything = RolloutBatch.concat(generated)
        return Gathered(step, RolloutBatch.concat(kept), everything, budget.prompts, rounds, generate_s, reward_s)

    def stage_context(self, step: int, policy, backend, version: int) -> StageContext:
        return StageContext(
            policy=policy,
            backend=backend,
            generator=self.sampling_rng,
            temperature=self.cfg.rollout.temperature,
            top_p=self.cfg.rollout.top_p,
            top_k=self.cfg.rollout.top_k,
            step=step,
            history=self.history,
            version=version,
        )

    def generate(self, ctx: StageContext, examples, budget) -> RolloutBatch:
        """The generate stage's groups, each row stamped with the sampling policy's version unless it has one."""
        batch = self.stages.generate(ctx, examples, budget)
        if batch.versions is None:
            batch.versions = torch.full((batch.num_samples,), ctx.version, dtype=torch.long)
        return batch

    def commit(self, gathered: Gathered) -> Collected:
        """Record a gathered step in the trainer's shared state: every scored group, kept or not, goes into the
        prompt history, then every stage that learns from a scored step observes it; the counters count it."""
        everything, batch, step = gathered.generated, gathered.batch, gathered.step
        self.history.update(everything, step)
        for component in vars(self.stages).values():  # every stage that learns from the scored step
            observe = getattr(component, "observe", None)
            if callable(observe):
                observe(everything)
        self.counters[metric.ROLLOUT_TOKENS] += everything.decoded
        self.counters[metric.SAMPLES] += everything.num_samples
        missing = gathered.wanted - batch.num_groups
        if missing > 0:
            self.reporter.log(
                f"step {step}: the filter kept {batch.num_groups} of {gathered.wanted} groups in {gathered.rounds} "
                f"rounds (filter.max_rounds); training on those, {missing} short"
            )
        observed = {**self.history.metrics(), **self.stage_metrics(COLLECT_STAGES)}
        return Collected(batch, everything, gathered.rounds, missing, gathered.generate_s, gathered.reward_s, observed)

    def extend(self, ctx: StageContext, batch: RolloutBatch, allocated) -> tuple[RolloutBatch, float, float]:
        """Further rollout stages of a scored round, as long as the control stage asks for more.

        Stage k's samples go through the generate stage and the rewards like the first stage's, and
        join their groups (which stay contiguous, so groups grow ragged); every sample's notes say
        the stage it came from. Returns the grown batch and the seconds spent generating and scoring.
        """
        control, generate_s, reward_s = self.stages.control, 0.0, 0.0
        for stage in range(2, getattr(control, "max_stages", 1) + 1):
            extras = control.extend(ctx, batch, stage - 1)
            groups = [g for g, count in enumerate(extras) if count > 0]
            if not groups:
                break
            examples = [batch.examples[g] for g in groups]
            extra_budget = allocated.extra(batch.num_groups, groups, [extras[g] for g in groups])
            t = time.perf_counter()
            more = self.generate(ctx, examples, extra_budget)
            generate_s += time.perf_counter() - t
            t = time.perf_counter()
            self.score(more)
            reward_s += time.perf_counter() - t
            if stage == 2:
                batch.note("control", "rollout stage 1")
            more.note("control", f"rollout stage {stage}")
            batch = batch.add_to_groups(groups, more)
        return batch, generate_s, reward_s

    def note_examples(self, examples) -> None:
        self.data_stream.add(examples)

    def score(self, batch: RolloutBatch) -> None:
        """Run every reward function on every completion; the reward is their weighted sum."""
        lengths, truncated = batch.lengths.tolist(), batch.truncated.tolist()
        groups = batch.group_index.tolist()  # once, not once a row (batch.example_of builds the whole index)
        parts = {name: [] for name in self.rewards}
        correct, answers = [], []
        for row, text in enumerate(batch.texts):
            example = batch.examples[groups[row]]
            completion = Completion(text=text, length=int(lengths[row]), truncated=bool(truncated[row]))
            for name, (_, fn) in self.rewards.items():
                parts[name].append(fn(example, completion))
            correct.append(self.task.is_correct(example, text))
            # a completion cut off by max_new_tokens has committed to no answer: "12345678" cut at 8 tokens
            # parses as a number, and counting it would pay exploration bonuses for ever-new truncated strings
            answers.append(None if completion.truncated else self.task.answer_key(example, text))
        batch.reward_parts = {name: torch.tensor(values) for name, values in parts.items()}
        batch.rewards = sum(weight * batch.reward_parts[name] for name, (weight, _) in self.rewards.items())
        batch.correct = torch.tensor(correct)
        batch.answers = answers

    # ------------------------------------------------------------------ phase: advantage
    def compute_advantages(self, batch: RolloutBatch) -> dict[str, float]:
        """Advantages of every sample; a sample is in the loss if both the filter and the estimator keep it.

        Returns what the estimator reports of its own (pipeline/advantage/...).
        """
        self.provide(batch)
        out = self.stages.advantage(batch)
        kept_by_filter = batch.in_loss if batch.in_loss is not None else torch.ones_like(out.in_loss)
        batch.advantages, batch.in_loss = out.advantages, out.in_loss & kept_by_filter
        batch.token_mask = out.token_mask
        if batch.weights is not None:  # importance weights of the samples' losses (e.g. survivors of an abort)
            weights = batch.weights.to(batch.advantages.device)
            batch.advantages = batch.advantages * (weights if batch.advantages.dim() == 1 else weights[:, None])
        for row, (value, estimator_keeps, filter_keeps) in enumerate(
            zip(batch.sample_advantages().tolist(), out.in_loss.tolist(), kept_by_filter.tolist())
        ):
            if not estimator_keeps:
                batch.notes[row]["advantage"] = f"{out.left_out}: left out of the loss"
            elif not filter_keeps:
                batch.notes[row]["advantage"] = f"{value:+.3f}, left out of the loss by the filter"
            else:
                batch.notes[row]["advantage"] = f"{value:+.3f}"
        return dict(out.stats)

    def provide(self, batch: RolloutBatch) -> None:
        """Fill, for every sample of the batch, what the chosen components declare they need (Declaration.needs)."""
        for need in sorted(self.needs):
            getattr(self, PROVIDERS[need])(batch)

    @torch.no_grad()
    def fill_ref_logprobs(self, batch: RolloutBatch) -> None:
        """batch.ref_logprobs (N, T): the frozen reference policy's log-probabilities of every completion token."""
        rows = torch.arange(batch.num_samples)
        inputs = self.model_inputs(batch, rows, batch.mask.to(self.device))
        batch.ref_logprobs = (self.token_logprobs(self.reference, inputs)[0] * inputs["mask"]).cpu()

    def fill_answer_counts(self, batch: RolloutBatch) -> None:
        """batch.answer_counts (N,): each sample's answer's count for its prompt in the prompt history, which
        already holds this step's groups (collect updates it before the advantage stage)."""
        batch.answer_counts = self.history.answer_counts(batch)

    # ------------------------------------------------------------------ phase: update
    def update(self, batch: RolloutBatch, step: int = 1, entropies: UpdateEntropies | None = None) -> dict[str, float]:
        """schedule.updates_per_batch passes of schedule.minibatches optimizer steps over the samples in the loss.

        Each pass is split into exactly schedule.minibatches parts whose sizes differ by at most
        one; a part left empty (fewer samples than minibatches) is skipped, and the learning-rate
        schedule still counts it, so the rate at every step is the one the schedule planned.
        `entropies`: rows whose per-token entropies under the policy before the update are recorded on the way
        (the inspector's), from recompute_old's forward or the first optimizer step's, and for the rows neither
        holds, a forward of their own (entropies_before_update).
        """
        model, schedule = self.policy.model, self.cfg.schedule
        rows = batch.in_loss.nonzero().flatten()  # samples left out of the loss cost no compute
        inputs = self.training_inputs(batch, rows)
        inputs["staleness"] = self.row_staleness(batch, rows, learner_version=step - 1)
        if entropies is not None:
            entropies.locate(rows)
        passes = [
            torch.randperm(len(rows), generator=self.shuffle_rng).tensor_split(schedule.minibatches)
            for _ in range(schedule.updates_per_batch)
        ]
        model.train()
        stats: dict[str, list[float]] = {}
        if self.recompute_old_logprobs and len(rows):
            stats[metric.SAMPLER_LOGPROB_DIFF] = [self.recompute_old(inputs, passes[0], entropies)]
        else:
            self.recompute_stale_old(inputs, passes[0])
            if entropies is not None:
                self.entropies_before_update(inputs, passes[0][0], entropies)
        first_update, done = (step - 1) * self.updates_per_step(), 0
        for i, chunk in enumerate(chunk for chunks in passes for chunk in chunks):
            stopping.checkpoint()
            if len(chunk) == 0:
                continue
            for name, value in self.optimizer_step(inputs, chunk, first_update + i, entropies).items():
                stats.setdefault(name, []).append(value)
            done += 1
        model.eval()
        return {metric.OPTIM_STEPS: float(done), **{name: float(np.mean(values)) for name, values in stats.items()}}

    @torch.no_grad()
    def recompute_old(self, inputs, chunks, entropies: UpdateEntropies | None = None) -> float:
        """Replace the sampler's log-probabilities by the trainer's own, before any update; return their gap.

        The chunks are those of the first pass, so its first minibatch sees exactly the
        numbers it will compute itself: its ratio is 1, as an on-policy ratio must be.
        The gap (mean |difference| per completion token) is policy/sampler_logprob_diff:
        how far the sampler's numerics (dtype, KV cache, another engine) are from the trainer's.
        """
        sampler = inputs["old_logprobs"]
        recomputed = sampler.clone()
        for chunk in chunks:
            if len(chunk):
                recomputed[chunk.to(sampler.device)] = self.token_logprobs(
                    self.policy.model, inputs, chunk, record=entropies
                )[0]
        mask = inputs["mask"]
        inputs["old_logprobs"] = recomputed * mask
        return float(((recomputed - sampler).abs() * mask).sum() / mask.sum().clamp(min=1))

    def recompute_stale_old(self, inputs, chunks) -> None:
        """pi_old of the rows an older policy sampled, recomputed by the learner before any update, where the
        sampler's numbers are otherwise carried: those rows take the decoupled form (objective.base.TokenClip),
        whose clip is against this proximal policy and whose weight is pi_prox / pi_behaviour, so their weight
        is the one a recomputing run gives them. Fresh rows keep the sampler's numbers. Each chunk of the first
        pass keeps its own stale rows, so the forwards are the minibatches' size."""
        stale = inputs["staleness"] > 0  # (B,)
        if self.stages.objective.proximal is None and bool(stale.any()):
            self.recompute_old(inputs, [chunk[stale[chunk.to(stale.device)].cpu()] for chunk in chunks])

    @staticmethod
    def row_staleness(batch: RolloutBatch, rows: torch.Tensor, learner_version: int) -> torch.Tensor:
        """(B,) long: versions between the learner and the policy that sampled each of `rows` (0 when unstamped)."""
        if batch.versions is None:
            return torch.zeros(len(rows), dtype=torch.long)
        return (learner_version - batch.versions[rows.to(batch.versions.device)]).clamp(min=0).cpu()

    @torch.no_grad()
    def entropies_before_update(self, inputs, first_chunk: torch.Tensor, entropies: UpdateEntropies) -> None:
        """Record the wanted rows that the first minibatch does not hold, from a forward over them alone, now: the
        first optimizer step records its own rows under the same policy, and later ones would see a newer one.

        With recompute_old (a forward over every row before any step) or one minibatch, no forward runs here.
        """
        later = sorted(set(entropies.wanted) - set(first_chunk.tolist()))
        if later:
            self.token_logprobs(self.policy.model, inputs, torch.tensor(later), record=entropies)

    def training_inputs(self, batch: RolloutBatch, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """Prompt (left-padded) + completion (right-padded) token matrices for the rows in the loss."""
        take = lambda x: x[rows.to(x.device)].to(self.device)  # noqa: E731  (rewards live on the CPU, tokens may not)
        mask = take(batch.mask)  # (B, T)
        if batch.token_mask is not None:  # the advantage stage keeps only some tokens in the loss
            mask = mask * take(batch.token_mask).to(mask.dtype)
        inputs = self.model_inputs(batch, rows, mask)
        inputs["old_logprobs"] = take(batch.logprobs)
        inputs["sampler_logprobs"] = take(batch.logprobs)  # kept when old_logprobs is replaced by the recompute
        inputs["advantages"] = take(batch.advantages)
        inputs["group"] = take(batch.group_index)  # (B,) the group of every row
        if self.reference is not None and batch.ref_logprobs is not None and batch.token_mask is None:
            # already computed for a component that reads it (Declaration.needs), on the same tokens and
            # attention: one forward of the reference per step, not two
            inputs["ref_logprobs"] = take(batch.ref_logprobs)
        elif self.reference is not None:
            with torch.no_grad():
                inputs["ref_logprobs"] = self.token_logprobs(self.reference, inputs)[0]
        return inputs

    def model_inputs(self, batch: RolloutBatch, rows: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """The rows' prompts (left-padded, each distinct prompt once) and completions (right-padded), attending to
        the `mask` (B, T) tokens.

        A group's rows share their prompt, so the prompts are kept once per group (P rows) and `prompt_of` (B,)
        says which one each row continues: token_logprobs runs the network over each prompt once, not once per row.
        """
        device = self.device
        groups, prompt_of = torch.unique(batch.group_index[rows.cpu()], return_inverse=True)  # (P,), (B,)
        prompt_ids, prompt_mask = left_pad([batch.prompt_ids[g] for g in groups.tolist()], self.policy.pad_id, device)
        completion = batch.tokens[rows.to(batch.tokens.device)].to(device)  # (B, T)
        prompt_of = prompt_of.to(device)
        attention = torch.cat([prompt_mask[prompt_of], mask.long()], dim=1)  # (B, L+T)
        return {
            "prompt_ids": prompt_ids,  # (P, L)
            "prompt_mask": prompt_mask,  # (P, L)
            "prompt_of": prompt_of,  # (B,) the row of prompt_ids each row continues
            "attention_mask": attention,
            "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),  # (B, L+T)
            "completion": completion,  # (B, T)
            "mask": mask,
        }

    def token_logprobs(self, model, inputs, chunk=None, with_entropy=False, record: UpdateEntropies | None = None):
        """log pi(o_t) of the completion tokens (B, T), at the sampling temperature; and the entropy (B, T) if asked.

        With schedule.length_buckets > 1, the rows go in buckets of similar length (workers/packing.py), each
        forwarded padded to its own longest attended token; the positions past it are 0 in both results.
        """
        most = self.cfg.schedule.length_buckets
        if most == 1:
            return self.bucket_logprobs(model, inputs, chunk, with_entropy, record)
        rows = chunk if chunk is not None else torch.arange(len(inputs["completion"]))
        width = inputs["prompt_ids"].shape[1]
        attended = inputs["attention_mask"][rows.to(inputs["attention_mask"].device), width:]  # (B, T)
        positions = torch.arange(1, attended.shape[1] + 1, device=attended.device)
        extents = (attended * positions).amax(1) if attended.shape[1] else attended.sum(1)  # (B,) last attended + 1
        length = inputs["completion"].shape[1]
        parts, order = [], []
        for at, bucket_width in length_buckets(extents, most):
            logprobs, entropy = self.bucket_logprobs(model, inputs, rows[at.to(rows.device)], with_entropy, record,
                                                     max(bucket_width, 1))  # fmt: skip
            pad = (0, length - logprobs.shape[1])
            parts.append((F.pad(logprobs, pad), F.pad(entropy, pad) if entropy is not None else None))
            order.append(at)
        back = torch.argsort(torch.cat(order).to(parts[0][0].device))  # bucket order -> the rows' own order
        logprobs = torch.cat([p for p, _ in parts])[back]
        entropy = torch.cat([e for _, e in parts])[back] if with_entropy else None
        return logprobs, entropy

    def bucket_logprobs(self, model, inputs, chunk=None, with_entropy=False, record=None, length=None):
        """token_logprobs of the rows `chunk` (None: every row), over their first `length` completion positions
        (None: all of them).

        Two forwards: the chunk's distinct prompts (P rows), then its completions (B rows) attending to their
        prompt's keys and values, gathered from the first's cache (the gradient flows back through them). Causal
        attention makes a prompt's states the same in every row that continues it, so this is the one-forward
        result over (B, L+T) without computing the prompt B/P times; the last completion token predicts
        nothing the loss reads, so it is not fed. `record` (the update's) takes, without gradient, the entropies
        of the rows it wants from the same log-probabilities.
        """
        pick = (lambda x: x) if chunk is None else (lambda x: x[chunk])
        width = inputs["prompt_ids"].shape[1]
        completion = pick(inputs["completion"])[:, :length]
        length, span = completion.shape[1], width + completion.shape[1]
        attention, positions = inputs["attention_mask"][:, :span], inputs["position_ids"][:, :span]
        used, owner = torch.unique(pick(inputs["prompt_of"]), return_inverse=True)  # (P,), (B,)
        prompt_mask = inputs["prompt_mask"][used]  # (P, L)
        prefix = model(
            input_ids=inputs["prompt_ids"][used],
            attention_mask=prompt_mask,
            position_ids=(prompt_mask.cumsum(-1) - 1).clamp(min=0),
            use_cache=True,
            logits_to_keep=1,
        )
        logits = prefix.logits[:, -1][owner, None]  # (B, 1, V): the prompt's last position predicts token 0
        if length > 1:
            cache = prefix.past_key_values
            cache.batch_select_indices(owner)
            rest = model(
                input_ids=completion[:, :-1],
                attention_mask=pick(attention)[:, :-1],
                position_ids=pick(positions)[:, width:-1],
                past_key_values=cache,
                use_cache=True,
            ).logits  # (B, T-1, V): completion position t predicts token t+1
            logits = torch.cat([logits, rest], dim=1)  # (B, T, V)
        logits = logits[:, :length]  # (B, T, V) when T is 0 too: rows with no completion token have nothing to score
        logp_all = torch.log_softmax(logits.float() / self.cfg.rollout.temperature, dim=-1)
        logprobs = logp_all.gather(-1, completion[..., None])[..., 0]  # (B, T)
        entropy = token_entropy(logp_all) if with_entropy else None  # (B, T)
        if record is not None:
            record.take(chunk, logp_all, entropy)
        return logprobs, entropy

    def optimizer_step(
        self, inputs, chunk: torch.Tensor, update: int, entropies: UpdateEntropies | None = None
    ) -> dict[str, float]:
        """One optimizer step on the rows `chunk`, at the learning rate the schedule gives optimizer step `update`."""
        cfg = self.cfg.objective
        mask = inputs["mask"][chunk]
        wants_entropy_grad = cfg.entropy_coef > 0
        logprobs, entropy = self.token_logprobs(
            self.policy.model, inputs, chunk, with_entropy=wants_entropy_grad, record=entropies
        )
        aggregate = aggregator(cfg.aggregation, mask, self.cfg.rollout.max_new_tokens)
        old, proximal_stats = self.proximal_logprobs(inputs, chunk, logprobs)
        loss_inputs = LossInputs(
            logprobs,
            old,
            inputs["advantages"][chunk],
            mask,
            aggregate,
            sampler_logprobs=inputs["sampler_logprobs"][chunk],
            group=inputs["group"][chunk],
            staleness=inputs["staleness"][chunk.cpu()],
        )
        out = self.stages.objective(loss_inputs)
        loss = out.loss
        stats = {**off_policy_stats(loss_inputs), **out.stats, **proximal_stats}
        if self.reference is not None:
            kl = KL_ESTIMATORS[cfg.kl_estimator](logprobs, inputs["ref_logprobs"][chunk])  # (B, T)
            loss = loss + cfg.kl_coef * aggregate(kl)
            stats[metric.KL_REF] = float(aggregate(kl.detach()))
        if wants_entropy_grad:
            loss = loss - cfg.entropy_coef * aggregate(entropy)
            stats[metric.ENTROPY] = float(aggregate(entropy.detach()))
        loss.backward()
        limit = self.cfg.optimizer.grad_clip or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), limit)
        # the objective may scale this step (VCPO's ESS): the rate, not the loss, since Adam undoes a loss scale
        lr = self.cfg.optimizer.lr * self.lr_factor(update) * out.step_scale
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        stats[metric.LR] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.stages.objective.proximal is not None:
            self.stages.objective.proximal.advance(self.policy.model)
        with torch.no_grad():
            log_ratio = old - logprobs.detach()
            stats[metric.APPROX_KL] = float(aggregate(torch.exp(-log_ratio) - 1 + log_ratio))
            if not wants_entropy_grad:
                stats[metric.ENTROPY] = float(aggregate(-logprobs.detach()))  # sampled-token estimate
        stats.update({metric.LOSS: float(loss.detach()), metric.GRAD_NORM: float(grad_norm)})
        return stats

    @torch.no_grad()
    def proximal_logprobs(self, inputs, chunk: torch.Tensor, logprobs: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """(B, T) pi_prox of the rows `chunk`: the objective's own proximal policy's (PPO-EWMA), from a forward of
        its network now; else pi_old as update() left it. And how far the proximal policy lags the current one."""
        proximal = self.stages.objective.proximal
        if proximal is None:
            return inputs["old_logprobs"][chunk], {}
        mask = inputs["mask"][chunk]
        network = proximal.network(self.policy.model)
        old = self.token_logprobs(network, inputs, chunk)[0] * mask
        lag = k3_kl(logprobs.detach(), old)  # (B, T) KL(pi || pi_prox)
        return old, {metric.PROXIMAL_LAG: float((lag * mask).sum() / mask.sum().clamp(min=1))}

    # ------------------------------------------------------------------ phase: evaluate
    @torch.no_grad()
    def evaluate(self, step: int) -> dict[str, float]:
        """eval/pass@1 (greedy), eval/pass@k and eval/maj@k (from eval.samples samples) on the held-out split, and
        the seconds it took (for an ETA that counts the evaluations still due)."""
        began = time.perf_counter()
        with self.deterministic():
            scores = self.evaluate_held_out(step)
        return {**scores, metric.EVAL_S: time.perf_counter() - began}

    def evaluate_held_out(self, step: int) -> dict[str, float]:
        examples = self.task.eval_examples()
        e, max_new = self.cfg.eval, self.cfg.rollout.max_new_tokens
        generator = torch.Generator(self.device).manual_seed(self.cfg.seed * 1_000_003 + step)
        with progress.phase("evaluating", total=len(examples) * (1 + e.n), unit="completions") as evaluating:
            greedy = self.eval_texts(examples, 1, SamplingParams(max_new, 0.0), generator, evaluating)
            sampled = self.eval_texts(examples, e.n, SamplingParams(max_new, e.temperature), generator, evaluating)
        return score_eval(self.task, examples, greedy, sampled, e.n, e.k)

    def eval_texts(self, examples, n: int, params: SamplingParams, generator, evaluating: progress.Phase,
                   rows_per_call: int = 1024) -> list[str]:  # fmt: skip
        prompts = [self.policy.encode_prompt(e.prompt) for e in examples]
        per_call, backend = max(1, rows_per_call // n), self.evaluator()
        texts = []
        for start in range(0, len(prompts), per_call):
            stopping.checkpoint()
            chunk = prompts[start : start + per_call]
            out = backend.generate(chunk, n, params, generator)
            texts += self.policy.decode_completions(out)
            evaluating.advance(len(chunk) * n)
        return texts

    # ------------------------------------------------------------------ phase: report
    def batch_metrics(self, collected: Collected) -> dict[str, float]:
        """Rewards and completions of everything generated this step; what the pipeline did."""
        gen, batch = collected.generated, collected.batch
        correct = gen.correct.float()
        lengths = gen.lengths
        metrics = {
            metric.REWARD_MEAN: float(gen.rewards.mean()),
            metric.REWARD_STD: float(gen.rewards.std()) if gen.num_samples > 1 else 0.0,
            **{metric.reward_part(name): float(v.mean()) for name, v in gen.reward_parts.items()},
            metric.FRAC_ZERO_STD: float(
                (gen.group_reduce(gen.rewards, "amax") == gen.group_reduce(gen.rewards, "amin")).float().mean()
            ),
            metric.FRAC_ALL_CORRECT: float((gen.group_reduce(correct, "amin") == 1).float().mean()),
            metric.FRAC_ALL_WRONG: float((gen.group_reduce(correct, "amax") == 0).float().mean()),
            metric.DISTINCT_COMPLETIONS: float(
                np.mean([len(set(gen.texts[a:b])) / (b - a) for a, b in zip(gen.offsets, gen.offsets[1:])])
            ),
            metric.MEAN_LENGTH: float(lengths.float().mean()),
            metric.MAX_LENGTH: float(lengths.max()),
            metric.CLIPPED_RATIO: float(gen.truncated.float().mean()),
            metric.SAMPLES_PER_PROMPT: gen.num_samples / gen.num_groups,
            metric.FILTER_ROUNDS: float(collected.rounds),
            metric.FILTER_MISSING_GROUPS: float(collected.missing_groups),
            metric.FILTER_DROPPED_GROUPS: float(gen.num_groups - batch.num_groups),
            metric.FILTER_KEPT_GROUPS: float(batch.num_groups),
            metric.FILTER_LEFT_OUT_SAMPLES: float((~batch.in_loss).sum()) if batch.in_loss is not None else 0.0,
            **collected.observed,
            **self.stage_metrics([stage for stage in vars(self.stages) if stage not in COLLECT_STAGES]),
        }
        return metrics

    def stage_metrics(self, stages) -> dict[str, float]:
        """What the named stages' components report of their own (pipeline/<stage>/...), for those that do."""
        metrics: dict[str, float] = {}
        for stage in stages:
            report = getattr(getattr(self.stages, stage), "metrics", None)
            if callable(report):
                metrics.update(report())
        return metrics

    @staticmethod
    def advantage_metrics(batch: RolloutBatch) -> dict[str, float]:
        used = batch.sample_advantages()[batch.in_loss]
        return {
            metric.ADVANTAGE_MEAN: float(used.mean()),
            metric.ADVANTAGE_ABS_MEAN: float(used.abs().mean()),
            metric.ADVANTAGE_LEFT_OUT: float((~batch.in_loss).sum()),
        }

    def pick_samples(self, trained: RolloutBatch, generated: RolloutBatch) -> list[dict]:
        """A bounded sample of this step's completions, whole groups, each sample with what every stage did to it.

        Whole groups, so the inspector shows a prompt's completions side by side: trained groups first, and up to
        a quarter of the budget for groups the filter dropped. A group larger than the budget is cut short.
        """
        return self.describe_samples(trained, generated, *self.sample_rows(trained, generated))

    def sample_rows(self, trained: RolloutBatch, generated: RolloutBatch) -> tuple[list[int], list[int]]:
        """The rows pick_samples stores: of `trained`, and of the groups `generated` holds that the filter dropped."""
        budget = self.cfg.schedule.samples_per_step
        dropped = [g for g in range(generated.num_groups) if self.was_dropped(generated, g)]
        dropped_rows = whole_groups(generated, dropped, budget // 4 if trained.num_samples else budget)
        return whole_groups(trained, range(trained.num_groups), budget - len(dropped_rows)), dropped_rows

    def describe_samples(
        self, trained: RolloutBatch, generated: RolloutBatch, trained_rows: list[int], dropped_rows: list[int]
    ) -> list[dict]:
        advantages = trained.sample_advantages() if trained.advantages is not None else None
        # groups numbered in the order shown: the trained ones, then the dropped ones
        number = {g: i for i, g in enumerate(dict.fromkeys(trained.group_index[trained_rows].tolist()))}
        described = [self.describe_sample(trained, r, advantages, number[int(trained.group_index[r])])
                     for r in trained_rows]  # fmt: skip
        number = {g: len(number) + i for i, g in enumerate(dict.fromkeys(generated.group_index[dropped_rows].tolist()))}
        described += [
            self.describe_sample(generated, r, None, number[int(generated.group_index[r])]) for r in dropped_rows
        ]
        return described

    def inspect_samples(self, trained: RolloutBatch, generated: RolloutBatch) -> tuple[list[dict], UpdateEntropies]:
        """pick_samples' samples, before the update, with each token's entropy under the learner's policy, taken
        so that no forward runs for the rows that the update runs one over anyway.

        Those rows (in the loss, no token masked out of their attention) get their entropies from the update's own
        forwards: the UpdateEntropies returned, passed to Trainer.update, fills them in. The others (dropped
        groups; rows out of the loss or with tokens masked) get theirs now, from a forward of their own. Either
        way, under the policy before the update: the one that sampled them, unless the asynchronous trainer
        sampled with an older one.
        """
        trained_rows, dropped_rows = self.sample_rows(trained, generated)
        described = self.describe_samples(trained, generated, trained_rows, dropped_rows)
        samples = dict(zip(trained_rows, described))
        in_update = {r: s for r, s in samples.items() if trained.token_mask is None and bool(trained.in_loss[r])}
        own = [r for r in trained_rows if r not in in_update]
        for sample, entropies in zip([samples[r] for r in own], self.sample_entropies(trained, own)):
            sample["entropies"] = entropies
        for sample, entropies in zip(described[len(trained_rows) :], self.sample_entropies(generated, dropped_rows)):
            sample["entropies"] = entropies
        return described, UpdateEntropies(in_update)

    def group_outcomes(self, generated: RolloutBatch) -> list[dict]:
        """Every group sampled this step, kept or dropped: its prompt, how many of its samples were correct, the
        spread of its rewards and its completions' lengths (the run page's per-prompt and per-step views)."""
        rewards, lengths = generated.rewards.tolist(), generated.lengths.tolist()
        correct = generated.correct.tolist()
        outcomes = []
        for g, example in enumerate(generated.examples):
            rows = generated.rows_of([g])
            outcomes.append(
                {
                    "prompt": example.prompt,
                    "answer": example.answer,
                    "size": len(rows),
                    "correct": sum(bool(correct[r]) for r in rows),
                    "reward_min": min(rewards[r] for r in rows),
                    "reward_max": max(rewards[r] for r in rows),
                    "lengths": [int(lengths[r]) for r in rows],
                    "kept": not self.was_dropped(generated, g),
                }
            )
        return outcomes

    @staticmethod
    def was_dropped(batch: RolloutBatch, group: int) -> bool:
        return batch.notes[batch.offsets[group]].get("filter", "").startswith("dropped")

    @torch.no_grad()
    def sample_entropies(self, batch: RolloutBatch, rows: list[int]) -> list[list[float]]:
        """Each row's per-token entropy (nats) of the learner's present policy, rounded for storage."""
        if not rows:
            return []
        index = torch.tensor(rows)
        mask = batch.mask[index.to(batch.mask.device)].to(self.device)
        _, entropy = self.token_logprobs(self.policy.model, self.model_inputs(batch, index, mask), with_entropy=True)
        lengths = mask.sum(-1).long().tolist()
        return [rounded(entropy[i, :n]) for i, n in enumerate(lengths)]

    def describe_sample(self, batch: RolloutBatch, row: int, advantages: torch.Tensor | None, group: int) -> dict:
        """One sample for the inspector; `advantages` (N,) per sample, None for groups never trained on.

        `group` numbers the step's stored groups (a group's samples share it, whatever their prompts look like);
        `tokens` and `logprobs` are the completion's tokens and the sampling policy's log-probability of each."""
        example = batch.example_of(row)
        used = advantages is not None and bool(batch.in_loss[row])
        length = int(batch.mask[row].sum())
        ids = batch.tokens[row, :length].tolist()
        return {
            "prompt": example.prompt,
            "answer": example.answer,
            "completion": batch.texts[row],
            "group": group,
            "reward": float(batch.rewards[row]),
            "rewards": {name: float(v[row]) for name, v in batch.reward_parts.items()},
            "correct": bool(batch.correct[row]),
            "advantage": float(advantages[row]) if used else None,
            "length": length,
            "truncated": bool(batch.truncated[row]),
            "stages": dict(batch.notes[row]),
            "tokens": [self.policy.tokenizer.decode([i]) for i in ids],
            "logprobs": rounded(batch.logprobs[row, :length]),
        }

    def system_metrics(self) -> dict[str, float]:
        """CPU, memory and GPU over the step (workers/system.py)."""
        return self.system.sample()

    # ------------------------------------------------------------------ resume checkpoints
    def resume_checkpoint_due(self, step: int) -> bool:
        """Whether a resume checkpoint follows `step`: every schedule.checkpoint_every steps (by model size when
        unset), never for the asynchronous trainer (its rollout thread is steps ahead) or without a directory."""
        if self.artifacts_dir is None or self.cfg.schedule.max_staleness is not None:
            return False
        return self.checkpoint_every > 0 and step % self.checkpoint_every == 0

    def write_resume_checkpoint(self, step: int) -> None:
        """Everything the steps after `step` read, saved, once everything reported up to it is stored: a run
        resumed from here reports the later steps again, and only those."""
        flush = getattr(self.reporter, "flush", None)  # a reporter that buffers writes out what it holds
        if callable(flush):
            flush()
        self.check_stop()  # a run taken over by a newer attempt meanwhile (the platform's fencing) writes nothing
        checkpoint.write_checkpoint(Path(self.artifacts_dir), step, self.state_dict())

    def state_dict(self) -> dict:
        """The trainer's state after a step: see workers/checkpoint.py for what and why."""
        return {
            "config_hash": self.cfg.config_hash(),
            "model": self.policy.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "random": repro.global_random_state(),
            "data_rng": self.data_rng.bit_generator.state,
            "sampling_rng": self.sampling_rng.get_state(),
            "shuffle_rng": self.shuffle_rng.get_state(),
            "counters": dict(self.counters),
            "data_stream": self.data_stream.state_dict(),
            "history": self.history.state_dict(),
            "components": checkpoint.freeze_components(self.stages, self.cfg),
        }

    def restore(self, point: checkpoint.ResumePoint) -> int:
        """Load a resume checkpoint of this run; returns the step it completed."""
        from workers.errors import ConfigError

        if self.cfg.schedule.max_staleness is not None:
            raise ConfigError("schedule.max_staleness: an asynchronous run has no resume checkpoints to go on from")
        state = checkpoint.read_checkpoint(point, self.device)
        if state["config_hash"] != self.cfg.config_hash():
            raise ConfigError(f"{point.path} is the checkpoint of another config (hash {state['config_hash'][:12]})")
        self.policy.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        repro.set_global_random_state(state["random"])
        self.data_rng.bit_generator.state = state["data_rng"]
        self.sampling_rng.set_state(state["sampling_rng"].cpu())
        self.shuffle_rng.set_state(state["shuffle_rng"].cpu())
        self.counters = dict(state["counters"])
        self.data_stream.load_state_dict(state["data_stream"])
        self.history.load_state_dict(state["history"])
        self.stages = checkpoint.thaw_components(state["components"], self.cfg)
        self.sync_samplers()  # a sampler made already loads the restored weights; the own backend before its next use
        self.reporter.log(f"resumed from the checkpoint of step {state['step']}")
        return int(state["step"])

    # ------------------------------------------------------------------ artifacts
    def save_checkpoint(self, step: int) -> None:
        """Weights, tokenizer, the prompt history and the resolved config, side by side."""
        if self.artifacts_dir is None:
            return
        path = Path(self.artifacts_dir) / "checkpoints" / f"step-{step}"
        self.policy.model.save_pretrained(path)
        self.policy.tokenizer.save_pretrained(path)
        (path / "prompt_history.json").write_text(json.dumps(self.history.state_dict()))
        (path / "run_config.yaml").write_text(yaml.safe_dump(self.cfg.model_dump(mode="json"), sort_keys=False))
        self.reporter.artifact(str(path), "checkpoint")
