"""`gdro`: adversaries over online difficulty classes pick the prompts and move rollouts between classes.

Multi-Adversary Group DRO for LLM reasoning (Panaganti et al. 2026, "Group Distributionally
Robust Optimization-Driven Reinforcement Learning for LLM Reasoning", arXiv 2601.19280). Prompts are put into
difficulty classes online, from their last pass rate in the run's prompt history (in place of the
paper's online pass@k classifier: docs/methods/gdro.md; unseen prompts form a class of their own).
Two independent games play on these classes, each with its own adversary:

- **Prompt-GDRO** (`prompt_game`): a multiplicative-weights sampler over the classes. After each
  step, every class observed updates its weight once, by its EMA loss (share of wrong rollouts)
  minus the mean EMA loss: one update per class per step, however many of its prompts were drawn,
  so a class is never favoured only for being frequent (the EMA debiasing). The step's prompts
  are drawn class by class from these weights, mixed with a uniform share for exploration.
- **Rollout-GDRO** (`rollout_game`): a prompt of class c gets n_c rollouts with
  n_c ∝ sqrt(v_c σ²_c) — the allocation that minimises Σ v_c σ²_c / n_c, the adversary-weighted
  variance of the classes' gradient estimates — where v_c is the class's adversary weight and σ²_c
  its reward variance. The shadow price μ is set each step so that the mean group size is exactly
  rollout.group_size: the budget is compute-neutral, and only moves between classes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.control.base import Controller
from workers.pipeline.control.budgeting import fixed_mean_sizes
from workers.pipeline.control.gdro import GDROKnobs
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Budget, StageContext
from workers.tasks import Example


def difficulty_class(history: PromptHistory, example: Example, classes: int) -> int:
    """0 .. classes-1 by the prompt's last pass rate p, class int((1 - p) classes) capped at classes-1: with 4, c0 is
    p > 3/4 (solved) and c3 is p <= 1/4 (never right, or right once in four at G = 4); `classes` if unseen."""
    stats = history.get(example)
    if stats is None:
        return classes
    return min(classes - 1, int((1.0 - stats.last_pass_rate) * classes))


class GroupDRO(Controller):
    """Adversaries over online pass-rate classes pick prompts and move rollouts to hard classes at a fixed mean (GDRO).

    Knobs: control.classes, prompt_game, rollout_game, candidates_per_prompt, eta, ema, explore,
    min_group, max_group. Reports pipeline/control/weight/<class>, pipeline/control/group_size/<class>
    and pipeline/control/shadow_price; classes are c0 (solved) .. c<K-1> (the hardest: pass rate <= 1/K) and unseen.
    """

    Knobs = GDROKnobs

    def __init__(self, cfg):
        c = cfg.control
        self.candidates_per_prompt = c.candidates_per_prompt if c.prompt_game else 1
        super().__init__(cfg)
        self.knobs = c
        self.names = [f"c{k}" for k in range(c.classes)] + ["unseen"]
        count = c.classes + 1
        self.log_weights = np.zeros(count)  # the adversary's multiplicative weights, in logs
        self.loss = np.full(count, 0.5)  # EMA share of wrong rollouts per class
        self.pass_rate = np.full(count, 0.5)  # EMA pass rate per class, for its reward variance
        self.rng = np.random.default_rng([cfg.seed, 0x6764726F])  # its own stream: the data order stays put
        self.classes_of: dict[str, int] = {}  # the class each prompt of this step was drawn in
        self.last: dict[str, float] = {}

    def plan(self, ctx: StageContext) -> Budget:
        self.classes_of = {}  # a new step: the classes its prompts are drawn in, over all its rounds
        return self.budget

    def class_of(self, ctx: StageContext, example: Example) -> int:
        return difficulty_class(ctx.history, example, self.knobs.classes)

    def sampling_probabilities(self, present: np.ndarray) -> np.ndarray:
        """The prompt game's class distribution, over the classes present among the candidates."""
        weights = np.exp(self.log_weights - self.log_weights.max()) * present
        uniform = present / present.sum()
        return (1 - self.knobs.explore) * weights / weights.sum() + self.knobs.explore * uniform

    def select(self, ctx: StageContext, candidates: list[Example], count: int) -> list[Example]:
        classes = [self.class_of(ctx, e) for e in candidates]
        self.classes_of.update({PromptHistory.key(e): c for e, c in zip(candidates, classes)})
        if not self.knobs.prompt_game:
            return candidates[:count]
        pools = {c: [i for i, k in enumerate(classes) if k == c] for c in set(classes)}
        chosen = []
        for _ in range(min(count, len(candidates))):
            present = np.array([float(bool(pools.get(c))) for c in range(len(self.names))])
            c = int(self.rng.choice(len(self.names), p=self.sampling_probabilities(present)))
            chosen.append(pools[c].pop(int(self.rng.integers(len(pools[c])))))
        self.last["pipeline/control/drawn_hard_share"] = float(
            np.mean([classes[i] == self.knobs.classes - 1 for i in chosen])
        )
        return [candidates[i] for i in chosen]

    def allocate(self, ctx: StageContext, examples: list[Example], budget: Budget) -> Budget:
        if not self.knobs.rollout_game or not examples:
            return budget
        classes = np.array([self.class_of(ctx, e) for e in examples])
        weights = np.exp(self.log_weights - self.log_weights.max())
        rate = np.clip(self.pass_rate, self.knobs.pass_rate_clip, 1 - self.knobs.pass_rate_clip)
        variance = rate * (1 - rate)
        scores = np.sqrt(weights * variance)[classes]
        sizes, price = fixed_mean_sizes(scores, budget.group_size, self.knobs.min_group, self.knobs.max_group)
        self.last["pipeline/control/shadow_price"] = price
        for k, name in enumerate(self.names):
            if (classes == k).any():
                self.last[f"pipeline/control/group_size/{name}"] = float(
                    np.mean([s for s, c in zip(sizes, classes) if c == k])
                )
        return replace(budget, group_sizes=tuple(sizes))

    def observe(self, batch: RolloutBatch) -> None:
        """One multiplicative-weights step per observed class, by its EMA loss against the mean."""
        right = batch.group_reduce(batch.correct.float(), "mean").tolist()  # (P,)
        by_class: dict[int, list[float]] = {}
        for example, rate in zip(batch.examples, right):
            c = self.classes_of.get(PromptHistory.key(example), self.knobs.classes)
            by_class.setdefault(c, []).append(rate)
        a = self.knobs.ema
        for c, rates in by_class.items():
            self.loss[c] = a * self.loss[c] + (1 - a) * (1 - float(np.mean(rates)))
            self.pass_rate[c] = a * self.pass_rate[c] + (1 - a) * float(np.mean(rates))
        observed = sorted(by_class)
        self.log_weights[observed] += self.knobs.eta * (self.loss[observed] - self.loss.mean())
        self.log_weights -= self.log_weights.max()  # keep them bounded; only ratios matter
        for k, name in enumerate(self.names):
            self.last[f"pipeline/control/weight/{name}"] = float(
                np.exp(self.log_weights[k]) / np.exp(self.log_weights).sum()
            )

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
