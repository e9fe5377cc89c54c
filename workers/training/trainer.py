"""The RL loop of every GRPO-family method: a trainer that puts a run's parts together and drives them.

    trainer = Trainer(cfg, reporter, artifacts_dir=Path("runs/demo"))
    trainer.run()   # -> "succeeded" | "cancelled"

One step:  collect (generate -> reward -> [more rollout stages, if the control stage extends the
scored groups] -> filter, repeated while the filter asks for more; the control stage sees every
group) -> replay.mix -> advantage -> update (objective) -> replay.store -> sync -> evaluate ->
report. The package's files, one part each:

    collector.py     the collecting half: gather (the rollout stages) and commit (the run sees the step)
    learner.py       the learning half: replay, advantage, the update and its optimizer
    forwards.py      the model inputs and per-token log-probabilities every forward goes through
    inspector.py     the samples the run page shows, an observer of the learner's forwards
    loop.py          the synchronous loop (make_loop, below, picks it or asynchronous.py's)
    report.py        a step's metrics, timings, samples and groups
    backends.py      where the run samples and evaluates; evaluation.py: the held-out evaluation
    state.py         what the steps share and a resume checkpoint saves; checkpoint.py: its files
    distributed.py   the same trainer on a Ray cluster, its rollouts sampled by rollout actors

Which components fill the stages comes from the config; nothing here asks which method it runs.
"""

from __future__ import annotations

import json
import time
from contextlib import closing
from pathlib import Path

import torch
import yaml

from workers import metrics as metric
from workers import progress, repro, stopping
from workers.models import adapters
from workers.models.policy import load_policy
from workers.pipeline.stages import build_stages
from workers.reporting import Reporter
from workers.system import SystemSampler
from workers.tasks import build_task
from workers.tasks.rewards import build_rewards
from workers.training import checkpoint
from workers.training.backends import Backends
from workers.training.collector import Collector
from workers.training.evaluation import Evaluator
from workers.training.forwards import Forwards
from workers.training.inspector import Inspector
from workers.training.learner import Learner
from workers.training.loop import Loop, Parts, SynchronousLoop
from workers.training.report import StepReport
from workers.training.signal import SignalWatch
from workers.training.state import RunState


def resolve_device(wanted: str) -> torch.device:
    if wanted == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if wanted == "cuda" and not torch.cuda.is_available():
        from workers.errors import ConfigError

        raise ConfigError("resources.device: 'cuda' was asked for but no CUDA GPU is visible")
    return torch.device(wanted)


def make_loop(parts: Parts) -> Loop:
    """The synchronous loop, or the asynchronous one (asynchronous.py) when schedule.max_staleness is set."""
    if parts.cfg.schedule.max_staleness is None:
        return SynchronousLoop(parts)
    from workers.training.asynchronous import Pipeline  # its rollout thread and copy exist only where asked for

    return Pipeline(parts)


class Trainer:
    def __init__(self, cfg, reporter: Reporter, artifacts_dir: Path | None = None, task=None, samplers=None):
        """samplers: where training rollouts are sampled, a function of the policy to sample from that returns its
        RolloutBackend (training/distributed.py's rollout actors); None: this process, through the run's backend."""
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
        self.backends = Backends(cfg, self.policy, samplers)
        rewards = build_rewards(self.task, cfg)
        self.state = RunState.start(build_stages(cfg), cfg.seed, self.device)
        forwards = Forwards(
            self.device,
            self.policy.pad_id,
            cfg.rollout.temperature,
            cfg.schedule.length_buckets,
            one_forward=getattr(cfg.model, "gradient_checkpointing", False),
            autocast=self.policy.autocast,
        )
        self.inspector = Inspector(cfg.schedule.samples_per_step, forwards, self.policy)
        self.collector = Collector(cfg, self.task, rewards, self.state, reporter)
        self.learner = Learner(cfg, self.policy, self.state, forwards, self.inspector, self.backends)
        self.evaluate = Evaluator(cfg, self.task, self.policy, self.backends, self.device)
        report = StepReport(cfg, reporter, self.state, SystemSampler(self.device), self.inspector, self.evaluate)
        self.parts = Parts(cfg, self.policy, self.device, self.backends, self.collector, self.learner, report)
        parameters = sum(p.numel() for p in self.policy.model.parameters())  # counted once, not every step
        self.checkpoint_every = checkpoint.checkpoint_interval(cfg.schedule.checkpoint_every, parameters)
        self.environment: dict | None = None
        self.signal = SignalWatch()  # says so when steps in a row train on nothing

    @property
    def stages(self):
        """The run's components, as they stand (a resume restores them)."""
        return self.state.stages

    def deterministic(self):
        """The block in which the trainer's torch work runs: deterministic kernels, resources.threads threads."""
        return repro.deterministic(self.device, self.cfg.resources.threads)

    def step(self, step: int) -> dict[str, float]:
        """One synchronous step, for a caller that drives single steps (a peer's training loop)."""
        return SynchronousLoop(self.parts).step(step)

    # ------------------------------------------------------------------ the run
    def run(self, resume: checkpoint.ResumePoint | None = None) -> str:
        """Train for schedule.steps (or until the time limit or a stop); return the final state.

        resume: a checkpoint of this run (training.checkpoint.latest_checkpoint): train from the step after it,
        with every state it saved, so the steps it reports are those the undisturbed run reports."""
        with self.deterministic():
            done = self.restore(resume) if resume is not None else 0
            return self.run_steps(done)

    def run_steps(self, done: int = 0) -> str:
        """The steps after step `done` (0: the whole run, the evaluation before any training included)."""
        about = f"{self.cfg.method or 'custom'} on {self.cfg.task.name}, device {self.device}"
        self.reporter.status("running", about + (f", resumed after step {done}" if done else ""))
        self.record_environment()
        # the time limit counts the training time before the resume too
        started, last_step = time.perf_counter() - self.state.counters[metric.WALL_S], done
        try:
            # closed on a break: the asynchronous producer is joined. Made before the first evaluation: the
            # asynchronous trainer's rollout copy, on Ray, is where that evaluation samples (evaluator)
            with closing(make_loop(self.parts).steps(done + 1)) as steps:
                if self.cfg.eval.every and not done:
                    self.reporter.metrics(0, self.evaluate(0))
                with self.training_phase() as training:
                    training.advance(done)
                    for step, metrics in steps:
                        training.note = self.signal.observe(metrics)
                        if self.signal.just_started():
                            self.reporter.log(f"step {step}: {training.note}")
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
        unlearned = f"; {self.signal.note()}" if self.signal.note() else ""
        self.reporter.status("succeeded", f"{last_step} steps{unlearned}")
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
        budget, spent = self.cfg.schedule.rollout_token_budget, self.state.counters[metric.ROLLOUT_TOKENS]
        if budget and spent >= budget:
            self.reporter.log(f"rollout-token budget of {budget:,} reached after step {step} ({spent:,.0f} sampled)")
            return True
        return False

    def training_phase(self):
        """The steps as a phase: the state line says how many are done (each step's metrics are its log)."""
        return progress.phase("training", total=self.cfg.schedule.steps, unit="steps", log_every_s=None)

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
        stream = self.state.data_stream
        path.write_text(json.dumps({"sha256": stream.hexdigest(), "examples": stream.examples}))
        self.reporter.artifact(str(path), "data-stream")

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
        stopping.checkpoint()  # a run taken over by a newer attempt meanwhile (the platform's fencing) writes nothing
        checkpoint.write_checkpoint(Path(self.artifacts_dir), step, self.state_dict())

    def state_dict(self) -> dict:
        """The trainer's state after a step: see training/checkpoint.py for what and why."""
        state = self.state
        return {
            "config_hash": self.cfg.config_hash(),
            "model": adapters.trainable_state(self.policy.model),
            "optimizer": self.learner.optimizer.state_dict(),
            "random": repro.global_random_state(),
            "data_rng": state.data_rng.bit_generator.state,
            "sampling_rng": state.sampling_rng.get_state(),
            "shuffle_rng": state.shuffle_rng.get_state(),
            "counters": dict(state.counters),
            "data_stream": state.data_stream.state_dict(),
            "history": state.history.state_dict(),
            "components": checkpoint.freeze_components(state.stages, self.cfg),
            "evaluation": self.evaluate.state_dict(),
        }

    def restore(self, point: checkpoint.ResumePoint) -> int:
        """Load a resume checkpoint of this run; returns the step it completed."""
        from workers.errors import ConfigError

        if self.cfg.schedule.max_staleness is not None:
            raise ConfigError("schedule.max_staleness: an asynchronous run has no resume checkpoints to go on from")
        state = checkpoint.read_checkpoint(point, self.device)
        if state["config_hash"] != self.cfg.config_hash():
            raise ConfigError(f"{point.path} is the checkpoint of another config (hash {state['config_hash'][:12]})")
        adapters.load_trainable_state(self.policy.model, state["model"])
        self.learner.optimizer.load_state_dict(state["optimizer"])
        repro.set_global_random_state(state["random"])
        run = self.state  # restored in place: the collector, the learner and the report share it
        run.data_rng.bit_generator.state = state["data_rng"]
        run.sampling_rng.set_state(state["sampling_rng"].cpu())
        run.shuffle_rng.set_state(state["shuffle_rng"].cpu())
        run.counters.clear()
        run.counters.update(state["counters"])
        run.data_stream.load_state_dict(state["data_stream"])
        run.history.load_state_dict(state["history"])
        run.stages = checkpoint.thaw_components(state["components"], self.cfg)
        self.evaluate.load_state_dict(state.get("evaluation", {}))  # a checkpoint written before it kept none
        self.backends.sync()  # a sampler made already loads the restored weights; the own backend before its next use
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
        (path / "prompt_history.json").write_text(json.dumps(self.state.history.state_dict()))
        (path / "run_config.yaml").write_text(yaml.safe_dump(self.cfg.model_dump(mode="json"), sort_keys=False))
        self.reporter.artifact(str(path), "checkpoint")
