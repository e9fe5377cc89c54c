"""`duet`: a pre-rollout surrogate sets each prompt's rollouts; a marker-gated rule aborts long rollouts.

DUET (DUal-controlled tokEn allocaTion; "DUET: Optimize Token-Budget Allocation for
Reinforcement Learning with Verifiable Rewards", 2025, the seed list) controls a step's token
budget along both of its dimensions at once:

- which prompts get rollouts: before any rollout, a cheap surrogate of each prompt's
  informativeness — the predicted standard deviation sqrt(p(1-p)) of its reward, with p the
  posterior mean pass rate from the run's prompt history (unseen prompts at the prior 1/2) —
  sets its group size, n_i ∝ sqrt(p_i(1-p_i)) within [min_group, max_group], at exactly the
  step's fixed total of prompts x rollout.group_size rollouts (the Neyman allocation: the sizes
  that best estimate the groups' mean rewards for that total);
- how long rollouts run: a rollout that reaches `abort_after` of its length limit without having
  written the answer `marker` is aborted (with an empty marker, every rollout still running at
  that length). An aborted rollout never finished, so it leaves its group; the group's survivors
  are importance-reweighted by n / survivors so the group keeps its weight in the loss (the
  generate stage does this for any stop rule the control stage hands it). A group always keeps
  at least `min_survivors` rollouts.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from workers.pipeline.control.base import Controller
from workers.pipeline.control.budgeting import fixed_mean_sizes
from workers.pipeline.control.duet import DUETKnobs
from workers.pipeline.stages import Budget, StageContext
from workers.rollout import Partial, StopRule
from workers.tasks import Example


class DualTokenAllocation(Controller):
    """A surrogate sets each prompt's rollouts at a fixed total; long rollouts without an answer marker abort (DUET).

    Knobs: control.min_group, max_group, abort_after, marker, min_survivors. Reports
    pipeline/control/aborted (rows aborted this step), pipeline/control/surrogate_std (mean predicted
    reward std of the step's prompts) and pipeline/control/largest_group.
    """

    Knobs = DUETKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.knobs = cfg.control
        self.last: dict[str, float] = {}
        self.marker_ids: list[int] | None = None

    def plan(self, ctx: StageContext) -> Budget:
        self.last = {"pipeline/control/aborted": 0.0}
        return self.budget

    def surrogate(self, ctx: StageContext, examples: list[Example]) -> np.ndarray:
        """(P,): the predicted reward std sqrt(p(1-p)) of each prompt, p its posterior mean pass rate."""
        means = []
        for e in examples:
            stats = ctx.history.get(e)
            means.append(0.5 if stats is None else stats.alpha / (stats.alpha + stats.beta))
        p = np.array(means)
        return np.sqrt(p * (1 - p))

    def allocate(self, ctx: StageContext, examples: list[Example], budget: Budget) -> Budget:
        if not examples:
            return budget
        spread = self.surrogate(ctx, examples)
        sizes, _ = fixed_mean_sizes(spread, budget.group_size, self.knobs.min_group, self.knobs.max_group)
        self.last["pipeline/control/surrogate_std"] = float(spread.mean())
        self.last["pipeline/control/largest_group"] = float(max(sizes))
        limits = budget.limits(len(examples))
        return replace(budget, group_sizes=tuple(sizes), stop=StopRule(abort=self.abort_rule(ctx, sizes, limits)))

    def abort_rule(self, ctx: StageContext, sizes: list[int], limits: list[int]):
        """The abort predicate for rows of groups `sizes` with length limits `limits` (one per group)."""
        if self.marker_ids is None:
            self.marker_ids = ctx.policy.tokenizer(self.knobs.marker, add_special_tokens=False)["input_ids"]
        group = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))  # (N,)
        threshold = torch.tensor([max(1, int(self.knobs.abort_after * limit)) for limit in limits])[group]  # (N,)
        aborted = torch.zeros(len(group), dtype=torch.bool)

        def abort(partial: Partial) -> torch.Tensor:
            running = ~partial.finished.cpu()
            due = running & (partial.tokens.shape[1] >= threshold) & ~self.has_marker(partial.tokens.cpu())
            cut = torch.zeros_like(due)
            for g in torch.unique(group[due]).tolist():
                rows = (group == g).nonzero().flatten()
                spare = len(rows) - int(aborted[rows].sum()) - self.knobs.min_survivors
                for r in rows[due[rows]].tolist()[: max(0, spare)]:
                    cut[r] = True
            aborted[cut] = True
            self.last["pipeline/control/aborted"] += float(cut.sum())
            return cut

        return abort

    def has_marker(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N,) bool: the row's tokens so far contain the marker's tokens (never for an empty marker: no gate)."""
        if not self.marker_ids:
            return torch.zeros(tokens.shape[0], dtype=torch.bool)
        n = len(self.marker_ids)
        if tokens.shape[1] < n:
            return torch.zeros(tokens.shape[0], dtype=torch.bool)
        windows = tokens.unfold(1, n, 1)  # (N, t-n+1, n)
        return (windows == torch.tensor(self.marker_ids)).all(-1).any(-1)

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
