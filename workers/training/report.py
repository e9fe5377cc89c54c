"""What a step reports: its batch's metrics, every component's own, and the step's timings, samples and groups.

metrics = batch_metrics(collected, stages)          # rewards, lengths, what the filter did, ...
report.finish(step, began, collected, trained, sync_s)  # timings and counters; samples, groups; evaluation
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from workers import metrics as metric
from workers import stopping
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import Stages
from workers.reporting import Reporter
from workers.system import SystemSampler
from workers.training.parts import COLLECT_STAGES, Collected, Trained
from workers.training.state import RunState


def batch_metrics(collected: Collected, stages: Stages) -> dict[str, float]:
    """Rewards and completions of everything generated this step; what the pipeline did."""
    gen, batch = collected.generated, collected.batch
    correct = gen.correct.float()
    lengths = gen.lengths
    return {
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
        **stage_metrics(stages, [stage for stage in vars(stages) if stage not in COLLECT_STAGES]),
        **episode_metrics(gen),
    }


def episode_metrics(batch: RolloutBatch) -> dict[str, float]:
    """What the environment saw of the batch's episodes; nothing for single-turn rollouts."""
    if batch.episodes is None:
        return {}
    turns = [turn for episode in batch.episodes for turn in episode.turns]
    policy = batch.trained_tokens().sum(-1)
    return {
        metric.EPISODE_SUCCESS: float(np.mean([episode.solved for episode in batch.episodes])),
        metric.EPISODE_TURNS: len(turns) / len(batch.episodes),
        metric.EPISODE_WELL_FORMED: float(np.mean([turn.well_formed for turn in turns])) if turns else 0.0,
        metric.EPISODE_CALLED: float(np.mean([called(episode.turns) for episode in batch.episodes])),
        metric.EPISODE_TRUNCATED: float(np.mean([episode.truncated for episode in batch.episodes])),
        metric.EPISODE_POLICY_TOKENS: float(policy.float().mean()),
        metric.EPISODE_OBSERVATION_TOKENS: float((batch.lengths - policy).float().mean()),
    }


def called(turns) -> bool:
    """Whether an episode acted on its environment in its format: a turn the environment read as an action (a
    tool call, moves) and could parse. An answer alone, or only malformed calls, is not a call."""
    return any(turn.action and turn.well_formed for turn in turns)


def stage_metrics(stages: Stages, names: Iterable[str]) -> dict[str, float]:
    """What the named stages' components report of their own (pipeline/<stage>/...)."""
    metrics: dict[str, float] = {}
    for name in names:
        metrics.update(getattr(stages, name).metrics())
    return metrics


def advantage_metrics(batch: RolloutBatch) -> dict[str, float]:
    used = batch.sample_advantages()[batch.in_loss]
    return {
        metric.ADVANTAGE_MEAN: float(used.mean()),
        metric.ADVANTAGE_ABS_MEAN: float(used.abs().mean()),
        metric.ADVANTAGE_LEFT_OUT: float((~batch.in_loss).sum()),
    }


class StepReport:
    """The end of every step, synchronous or not: its timings and counters, the inspector's samples, the groups
    it sampled, and the evaluation when one falls due."""

    def __init__(self, cfg, reporter: Reporter, state: RunState, system: SystemSampler, inspector, evaluate):
        self.cfg, self.reporter, self.state, self.system = cfg, reporter, state, system
        self.inspector, self.evaluate = inspector, evaluate  # evaluate(step) -> the eval metrics

    def finish(self, step: int, began: float, collected: Collected, trained: Trained, sync_s: float) -> dict:
        """Step `step`'s metrics, complete; `began` its perf_counter at the start, `sync_s` its weight sync."""
        step_s = time.perf_counter() - began
        counters = self.state.counters
        counters[metric.WALL_S] += step_s
        metrics = trained.metrics
        metrics.update(
            {
                metric.GENERATE_S: collected.generate_s,
                metric.REWARD_S: collected.reward_s,
                metric.TRAIN_S: trained.train_s,
                metric.SYNC_S: sync_s,
                metric.STEP_S: step_s,
                metric.ROLLOUT_TOKENS_PER_S: collected.generated.decoded / collected.generate_s,
                **counters,
                **self.system.sample(),  # CPU, memory and GPU over the step (workers/system.py)
            }
        )
        self.reporter.groups(step, self.inspector.group_outcomes(collected.generated, collected.dropped))
        described = collected.described  # taken before the update, or (nothing trained) now
        if described is None:
            described = self.inspector.pick(trained.batch, collected.generated, collected.dropped)
        self.reporter.samples(step, described)
        if self.cfg.eval.every and step % self.cfg.eval.every == 0:
            stopping.checkpoint()
            metrics.update(self.evaluate(step))
        return metrics
