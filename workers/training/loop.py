"""The synchronous loop that drives a step's two halves (asynchronous.py's Pipeline drives the same parts).

    loop = SynchronousLoop(parts)
    for step, metrics in loop.steps(first): ...

One synchronous step, top to bottom:

    collected = collector.collect(step, policy, sampler, version=step - 1)   # generate, reward, filter
    trained   = learner.learn(step, collected)                               # replay, advantage, update
    backends.sync()                                                          # the samplers take the new weights
    metrics   = report.finish(step, began, collected, trained, sync_s)       # timings, samples, evaluation
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch

from workers import repro, stopping
from workers.training.backends import Backends
from workers.training.collector import Collector
from workers.training.learner import Learner
from workers.training.report import StepReport


@dataclass
class Parts:
    """What a loop drives: the two halves of a step, where they sample, and the step's report."""

    cfg: object  # RunConfig
    policy: object  # workers.models.Policy: the learner's
    device: torch.device
    backends: Backends
    collector: Collector
    learner: Learner
    report: StepReport


class Loop(Protocol):
    def steps(self, first: int = 1) -> Iterator[tuple[int, dict[str, float]]]:
        """Every step's number and metrics from step `first`, in order."""
        ...


class SynchronousLoop:
    def __init__(self, parts: Parts):
        self.parts = parts

    def steps(self, first: int = 1) -> Iterator[tuple[int, dict[str, float]]]:
        for step in range(first, self.parts.cfg.schedule.steps + 1):
            stopping.checkpoint()
            yield step, self.step(step)

    def step(self, step: int) -> dict[str, float]:
        """One RL step: collect, learn, sync; and the evaluation when it falls due."""
        p = self.parts
        with repro.deterministic(p.device, p.cfg.resources.threads):
            began = time.perf_counter()
            collected = p.collector.collect(step, p.policy, p.backends.sampler, version=step - 1)
            stopping.checkpoint()
            trained = p.learner.learn(step, collected)
            synced = time.perf_counter()
            p.backends.sync()
            return p.report.finish(step, began, collected, trained, time.perf_counter() - synced)
