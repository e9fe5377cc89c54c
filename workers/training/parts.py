"""What the two halves of a step hand each other: a gathered, a collected and a trained batch."""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.pipeline.batch import RolloutBatch

# the stages that run while rollouts are collected (by the rollout thread, in the asynchronous trainer); the others
# run in the learner
COLLECT_STAGES = ("generate", "filter", "control")


@dataclass
class Gathered:
    """What one step's rollout stages produced, before the run's shared state has seen it (Collector.commit)."""

    step: int
    batch: RolloutBatch  # the groups the filter kept
    generated: RolloutBatch  # every group sampled, kept or dropped
    dropped: list[int]  # the groups of `generated` the filter dropped, in order
    wanted: int  # the groups the control stage planned
    rounds: int
    generate_s: float
    reward_s: float


@dataclass
class Collected:
    """What one step's collect phase produced."""

    batch: RolloutBatch  # the groups that go on to training
    generated: RolloutBatch  # every group sampled this step, kept or dropped
    dropped: list[int]  # the groups of `generated` the filter dropped, in order
    rounds: int
    missing_groups: int  # groups the filter could not fill within its rounds
    generate_s: float
    reward_s: float
    # the prompt history's metrics and the collecting stages' own, as they were once the step's groups were seen:
    # the asynchronous trainer reports a batch some steps after it was collected
    observed: dict[str, float] = field(default_factory=dict)
    # the samples stored for the inspector, described by the learner around its update (Inspector.inspect)
    described: list[dict] | None = None


@dataclass
class Trained:
    """What the learner made of a collected batch."""

    metrics: dict[str, float]  # the batch's, the advantage's and the update's; the step's report adds its timings
    batch: RolloutBatch  # the batch trained on (replay mixed in, groups too stale dropped)
    train_s: float  # the update's seconds
