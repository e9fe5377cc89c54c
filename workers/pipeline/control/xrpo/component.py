"""`xrpo`: extra rollouts go, a round at a time, to the prompts whose mean reward is most uncertain.

XRPO's rollout allocator (Bamba et al. 2025, "XRPO: Pushing the limits of GRPO with Targeted
Exploration and Exploitation", arXiv 2510.06672, the hierarchical rollout planner): every prompt
first gets a small group (rollout.group_size), then the rest of the step's budget is handed out
in rounds of a fixed size. The uncertainty of a prompt's mean reward after n rollouts is the
half-width of its Student-t confidence interval,

    h(n) = t_{1 - alpha/2, n - 1} * s / sqrt(n)      (s: the sample standard deviation of its rewards),

and one more rollout is worth the shrink it buys, h(n) - h(n + 1) (s held at its estimate), plus
an exploration bonus for prompts sampled less often, c * sqrt(ln N / n_q) (UCB-style; n_q counts
the prompt's rollouts in this step and in the run's history, N all of them over the round's
prompts). Within a round the rollouts are given one at a time to the prompt of highest
priority, whose n then counts the rollout already planned; after each round the new samples
are scored and s re-estimated. A prompt whose group is all right or all wrong has s = 0: only
the bonus reaches it. The paper's in-context seeding of zero-reward prompts needs curated
exemplars that these tasks do not have, and is left out.
"""

from __future__ import annotations

import math
from functools import cache

from scipy.stats import t as student_t

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.control.base import Controller
from workers.pipeline.control.xrpo import XRPOKnobs
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Budget, StageContext


@cache
def t_quantile(confidence: float, degrees: int) -> float:
    """t_{1-alpha/2, degrees}: asked thousands of times a step for a handful of group sizes."""
    return float(student_t.ppf(0.5 + confidence / 2, degrees))


def half_width(std: float, n: int, confidence: float) -> float:
    """h(n) = t_{1-alpha/2, n-1} s / sqrt(n); unbounded for one sample (no spread can be estimated)."""
    if n < 2:
        return math.inf
    return t_quantile(confidence, n - 1) * std / math.sqrt(n)


def priority(std: float, n: int, seen: int, total: int, confidence: float, bonus: float) -> float:
    """What the next rollout of a prompt buys: h(n) - h(n + 1), plus bonus * sqrt(ln total / seen)."""
    shrink = half_width(std, n, confidence) - half_width(std, n + 1, confidence) if std > 0 else 0.0
    return shrink + bonus * math.sqrt(math.log(max(total, 2)) / max(seen, 1))


def allocate_round(
    stds: list[float], sizes: list[int], past: list[int], count: int, confidence: float, bonus: float
) -> list[int]:
    """`count` rollouts, one at a time, each to the prompt of highest priority given those already planned.

    stds, sizes: each group's reward spread and size so far this step; past: its rollouts in earlier steps.
    Ties go to the earlier group.
    """
    extras = [0] * len(sizes)
    for _ in range(count):
        total = sum(sizes) + sum(past) + sum(extras)
        scores = [
            priority(std, size + more, size + more + before, total, confidence, bonus)
            for std, size, more, before in zip(stds, sizes, extras, past)
        ]
        extras[max(range(len(scores)), key=lambda g: (scores[g], -g))] += 1
    return extras


def past_rollouts(history: PromptHistory, batch: RolloutBatch) -> list[int]:
    """Each group's rollouts in earlier steps (the history is updated only after this step's collect)."""
    return [stats.samples if (stats := history.get(e)) else 0 for e in batch.examples]


class UncertaintyAllocation(Controller):
    """Rounds of extra rollouts go to the prompts whose t-interval of the mean reward shrinks most (XRPO).

    Knobs: control.extra_budget (x the step's base budget), control.round_size, control.stages,
    control.confidence, control.bonus. Reports pipeline/control/extra_rollouts (extras of the
    step) and pipeline/control/grown_prompts (prompts that got at least one).
    """

    Knobs = XRPOKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg.control
        self.max_stages, self.confidence, self.bonus = c.stages, c.confidence, c.bonus
        self.round_size = c.round_size or self.budget.prompts
        self.step_budget = math.floor(c.extra_budget * self.budget.prompts * self.budget.group_size)
        self.extra_left, self.extra_rollouts, self.grown = self.step_budget, 0, set()

    def plan(self, ctx: StageContext) -> Budget:
        self.extra_left, self.extra_rollouts, self.grown = self.step_budget, 0, set()
        return super().plan(ctx)

    def extend(self, ctx: StageContext, batch: RolloutBatch, stage: int) -> list[int]:
        count = min(self.round_size, self.extra_left)
        if count <= 0:
            return []
        means = batch.group_reduce(batch.rewards.float(), "mean")  # (P,)
        squares = batch.group_reduce((batch.rewards.float() - means[batch.group_index]) ** 2, "sum")  # (P,)
        sizes = batch.group_sizes
        stds = [math.sqrt(sq / (n - 1)) if n > 1 else 0.0 for sq, n in zip(squares.tolist(), sizes)]
        extras = allocate_round(stds, sizes, past_rollouts(ctx.history, batch), count, self.confidence, self.bonus)
        self.extra_left -= sum(extras)
        self.extra_rollouts += sum(extras)
        self.grown |= {ctx.history.key(batch.examples[g]) for g, more in enumerate(extras) if more}
        return extras

    def metrics(self) -> dict[str, float]:
        return {
            "pipeline/control/extra_rollouts": float(self.extra_rollouts),
            "pipeline/control/grown_prompts": float(len(self.grown)),
        }
