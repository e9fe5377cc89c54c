"""What a run's steps read and write besides the policy's weights and the optimizer: one object that the
collector and the learner share, and that a resume checkpoint saves and restores in place."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from workers import metrics as metric
from workers import repro
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Stages


@dataclass
class RunState:
    stages: Stages  # the components, with whatever they learned from the steps so far
    history: PromptHistory
    # separate streams, so that e.g. evaluating more often never changes the training samples
    data_rng: np.random.Generator  # the prompts drawn
    sampling_rng: torch.Generator  # the rollouts sampled
    shuffle_rng: torch.Generator  # the minibatches
    counters: dict[str, float] = field(
        default_factory=lambda: {metric.ROLLOUT_TOKENS: 0.0, metric.SAMPLES: 0.0, metric.WALL_S: 0.0}
    )
    data_stream: repro.DataStream = field(default_factory=repro.DataStream)  # every example drawn, in order

    @classmethod
    def start(cls, stages: Stages, seed: int, device) -> RunState:
        return cls(
            stages=stages,
            history=PromptHistory(),
            data_rng=np.random.default_rng(seed),
            sampling_rng=torch.Generator(device).manual_seed(seed),
            shuffle_rng=torch.Generator().manual_seed(seed + 1),
        )
