"""The asynchronous trainer: rollouts generated up to schedule.max_staleness policy versions ahead of the learner.

    cfg = resolve({"method": "grpo", "schedule": {"max_staleness": 2}})
    Trainer(cfg, reporter).run()   # training/trainer.py's make_loop picks Pipeline

A policy's version is the number of RL steps it has been trained for: the learner is at version
t - 1 while it trains step t, and t after. A copy of the policy (its own weights and tokenizer,
its own rollout backend) samples; the learner trains its own weights, which are copied into the
rollout copy after every step (timing/sync_s). With k = max_staleness the pipeline has a fixed lag:

    batches 1 .. k are collected first, by version 0;
    step t:  learn(t) in this thread  ||  collect(t + k) in the rollout thread, by version t - 1;
             then the barrier: the rollout thread's batch is committed, version t is synced.

So batch t is sampled by version max(0, t - 1 - k), and its staleness when it trains, t - 1 minus
that, is min(t - 1, k). The lag k is schedule.rollout_lag when set (at most max_staleness): below the bound, it
leaves room for rows older than a fresh batch, such as the groups of episodes generate april carries over, to train.
With k = 0 nothing overlaps: step t collects with version t - 1 and then trains on it, which is the synchronous
trainer's step, and gives its metric stream; the learner's own policy then samples (a copy's weights at other
addresses may take other vectorised kernel paths on some CPUs, and round differently).

Thread safety is by construction, not by locks. The rollout thread runs only Collector.gather
(control, generate, score, extend, filter) on the rollout copy with the run's data and
sampling streams, which nothing else touches; what a collected step changes in the run's
shared state (the prompt history, every stage's observe, the counters) is Collector.commit, run in
this thread at the barrier, when the rollout thread is idle. The learner (replay, advantage,
update) runs in this thread and reads nothing the rollout thread writes. Every run of the
pipeline is therefore the same computation in the same order: CPU runs stay bit-identical.

Every row carries the version that sampled it (RolloutBatch.versions). A fresh batch is never
more than k versions old; a replayed group (rollout-replay, rorecomp) keeps its versions and can
be, and StalenessBound drops it before the advantage stage. The off-policy correction of the rows
that train is the objective's own (objective.old_logprobs; the truncated-is objective).
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch

from workers import metrics as metric
from workers import stopping
from workers.pipeline.batch import RolloutBatch
from workers.training.loop import Parts

if TYPE_CHECKING:
    from workers.training.parts import Collected


class StalenessBound:
    """The learner's guard: no row more than `limit` versions older than the learner reaches the loss.

    A group is dropped whole (its advantages are relative to the group) if any of its rows is too old.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.dropped = 0  # rows dropped from the last batch admitted

    def admit(self, batch: RolloutBatch, learner_version: int) -> RolloutBatch:
        """The batch without its groups that hold a row older than the limit; the others in their order."""
        too_old = batch.group_reduce(batch.staleness(learner_version), "amax") > self.limit  # (P,)
        keep = [g for g, stale in enumerate(too_old.tolist()) if not stale]
        self.dropped = batch.num_samples - sum(batch.group_sizes[g] for g in keep)
        return batch if len(keep) == batch.num_groups else batch.select_groups(keep)

    def metrics(self, batch: RolloutBatch, learner_version: int) -> dict[str, float]:
        """pipeline/async/*: the staleness of the rows in the loss, and the rows dropped as too stale."""
        in_loss = batch.in_loss if batch.in_loss is not None else torch.ones(batch.num_samples, dtype=torch.bool)
        ages = batch.staleness(learner_version)[in_loss.cpu()].float()
        return {
            metric.ASYNC_STALENESS_MEAN: float(ages.mean()) if len(ages) else 0.0,
            metric.ASYNC_STALENESS_MAX: float(ages.max()) if len(ages) else 0.0,
            metric.ASYNC_DROPPED_SAMPLES: float(self.dropped),
        }


class Pipeline:
    """The asynchronous trainer's loop (see the module docstring): a rollout copy of the policy, one rollout
    thread, the batches collected but not yet trained on, and the bound on their staleness. It drives the
    same two halves as the synchronous loop (training/loop.py)."""

    def __init__(self, parts: Parts):
        schedule = parts.cfg.schedule
        self.parts, self.cfg = parts, parts.cfg
        self.lag = schedule.max_staleness if schedule.rollout_lag is None else schedule.rollout_lag
        if self.lag == 0:  # nothing overlaps: the learner's own policy samples, as in the synchronous loop
            self.rollout, self.backend = parts.policy, parts.backends.sampler
        else:  # a copy with its own tokenizer too: the learner's evaluates meanwhile (on Ray, this copy's actors do)
            self.rollout = copy.deepcopy(parts.policy)
            self.backend = parts.backends.sampler_for(self.rollout)
            parts.backends.use_rollout_copy(self.backend)
        self.version = 0  # the rollout copy's: RL steps its weights have been trained for
        self.collected: deque[Collected] = deque()  # committed, oldest first: batch `trained + 1` comes first
        self.produced = 0  # batches gathered so far
        self.bound = StalenessBound(schedule.max_staleness)  # the lag, or above it: room for carried rows

    def steps(self, first: int = 1) -> Iterator[tuple[int, dict[str, float]]]:
        """Every step's number and metrics; an asynchronous run writes no resume checkpoint, so it starts at 1."""
        last, halt = self.cfg.schedule.steps, threading.Event()
        with ThreadPoolExecutor(1, thread_name_prefix="rollout", initializer=self.thread_setup(halt)) as rollout:
            try:
                for step in range(first, last + 1):
                    stopping.checkpoint()
                    yield step, self.step(step, rollout)
            finally:  # a stop, an error or the time limit: the batch being collected will never train
                halt.set()

    def thread_setup(self, halt: threading.Event):
        """What the rollout thread starts with: `halt` as its stop, the run's deadline, and its torch thread count
        (per thread; the deterministic kernels, set by Trainer.run around the whole loop, are global)."""
        inherit, threads = stopping.for_another_thread(halt.is_set), self.cfg.resources.threads

        def setup() -> None:
            inherit()
            torch.set_num_threads(threads)

        return setup

    def step(self, step: int, rollout: ThreadPoolExecutor) -> dict[str, float]:
        """Train step `step` while the rollout thread collects batch step + k; then the barrier and the sync."""
        began = time.perf_counter()
        self.catch_up(step + max(self.lag - 1, 0))  # the first k batches, or (k = 0) this step's
        ahead = self.gather_ahead(rollout) if self.lag and self.produced < self.cfg.schedule.steps else None
        collected = self.collected.popleft()
        trained = self.parts.learner.learn(step, collected, self.bound)
        if ahead is not None:
            self.collected.append(self.parts.collector.commit(self.wait(ahead)))
        sync_s = self.sync(step)
        return self.parts.report.finish(step, began, collected, trained, sync_s)

    def catch_up(self, batch: int) -> None:
        """Collect and commit, in this thread, every batch up to `batch` not collected yet."""
        while self.produced < min(batch, self.cfg.schedule.steps):
            self.produced += 1
            self.collected.append(self.parts.collector.commit(self.gather(self.produced, self.version)))

    def gather_ahead(self, rollout: ThreadPoolExecutor) -> Future:
        """Batch `produced + 1`, collected in the rollout thread by the rollout copy's present version."""
        self.produced += 1
        return rollout.submit(self.gather, self.produced, self.version)

    def gather(self, step: int, version: int):
        return self.parts.collector.gather(step, self.rollout, self.backend, version)

    @staticmethod
    def wait(ahead: Future):
        """The rollout thread's batch, once it is ready; meanwhile this thread keeps answering a stop."""
        while True:
            try:
                return ahead.result(timeout=0.5)
            except TimeoutError:
                stopping.checkpoint()

    @torch.no_grad()
    def sync(self, step: int) -> float:
        """Copy the learner's weights (version `step`) into the rollout copy; the seconds it took."""
        began = time.perf_counter()
        if self.rollout is not self.parts.policy:
            self.rollout.model.load_state_dict(self.parts.policy.model.state_dict())
            self.backend.sync_weights()
        self.parts.backends.sync()  # the learner's own backend samples with max_staleness 0; else it evaluates
        self.version = step
        return time.perf_counter() - began
