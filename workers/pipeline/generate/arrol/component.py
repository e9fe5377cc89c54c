"""`arrol`: over-sample, predict each partial rollout's success with a head trained online, prune to a balanced group.

arrol (Accelerating RLVR via online Rollout pruning; "Prune as You Generate: Online Rollout
Pruning for Faster and Better RLVR", 2025, the seed list). Each prompt starts `oversample` x G
rollouts. After `check_at` tokens a light quality head — logistic regression on the policy's last
hidden state at the partial rollout's latest token — predicts each rollout's chance of ending
correct, and each group is pruned to G survivors chosen to be correctness-balanced: half of them
(rounded up) the most likely right, the rest the most likely wrong. A group whose survivors are
balanced has a reward variance, so a GRPO gradient, where a random group of G might not. Pruned
rollouts stop decoding at once (the saved tokens) and never reach the reward or the trainer.

The head learns on the fly: after the step is scored, it takes a few gradient steps on the
(hidden state at the check, final correctness) pairs of the survivors. Each survivor's hidden
state is attached to its own row (RolloutBatch.attached), so the pair stays right whatever
joins the step's rows later: a control stage's extra rollouts appended to their groups (DARS,
XRPO), a filter's later rounds. A row that ended before its check has no state and no pair.
Until the head has trained for `warmup_steps` steps its predictions are not trusted and
pruning is at random.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.arrol import ArrolKnobs
from workers.pipeline.generate.base import decoded_batch
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.rollout import Partial, SamplingParams, StopRule
from workers.tasks import Example

HIDDEN_AT_CHECK = "arrol/hidden_at_check"  # (N, C) each survivor's last hidden state at the check (NaN: none)


def balanced_survivors(predicted: torch.Tensor, keep: int) -> list[int]:
    """Indices of `keep` of a group's rollouts (n,): ceil(keep/2) most likely right, the rest most likely wrong."""
    order = predicted.argsort(descending=True, stable=True).tolist()
    likely_right = math.ceil(keep / 2)
    return sorted(order[:likely_right] + order[len(order) - (keep - likely_right) :])


class OnlineRolloutPruning(GenerateStage):
    """Over-sample, predict partial rollouts' success with a head trained online, prune groups to G balanced (arrol).

    Knobs: generate.oversample, check_at, head_lr, head_steps, warmup_steps. Reports
    pipeline/generate/pruned (rollouts pruned this step), pipeline/generate/head_accuracy (the
    head's accuracy on the step's survivors, before it trains on them), pipeline/generate/head_loss.
    """

    Knobs = ArrolKnobs

    def __init__(self, cfg):
        g = cfg.generate
        self.oversample, self.check_at, self.warmup = g.oversample, g.check_at, g.warmup_steps
        self.head_lr, self.head_steps = g.head_lr, g.head_steps
        self.head: torch.nn.Linear | None = None  # built at the first hidden state it sees
        self.optimizer = None
        self.trained = 0  # steps the head has trained
        self.seed = cfg.seed
        self.rng = np.random.default_rng([cfg.seed, 0x6172726F])  # its own stream: sampling stays put
        self.last: dict[str, float] = {}

    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        keep = budget.sizes(len(examples))
        started = [max(size, math.ceil(self.oversample * size)) for size in keep]
        prompt_ids = [ctx.policy.encode_prompt(e.prompt) for e in examples]
        offsets = np.concatenate([[0], np.cumsum(started)])
        decision: dict[str, object] = {}

        def prune(partial: Partial) -> torch.Tensor:
            if "survivors" in decision:
                return torch.zeros_like(partial.finished)
            hidden = partial.hidden.float()
            predicted = self.predict(hidden)
            survivors = []
            for g, size in enumerate(keep):
                rows = list(range(offsets[g], offsets[g + 1]))
                if predicted is None:
                    chosen = sorted(self.rng.choice(len(rows), size=size, replace=False).tolist())
                else:
                    chosen = balanced_survivors(predicted[rows].cpu(), size)
                survivors += [rows[i] for i in chosen]
            decision["survivors"], decision["hidden"] = survivors, hidden.detach().cpu()
            cut = torch.ones_like(partial.finished)
            cut[survivors] = False
            return cut

        params = SamplingParams(budget.max_new_tokens, ctx.temperature, ctx.top_p, ctx.top_k)
        out = ctx.backend.generate(
            prompt_ids,
            started,
            params,
            ctx.generator,
            limits=budget.limits(len(examples)),
            stop=StopRule(abort=prune, every=self.check_at, wants_hidden=True),
        )
        full = decoded_batch(ctx, examples, started, prompt_ids, out)
        survivors = decision.get("survivors")
        if survivors is None:  # every rollout ended before the check: keep a random `size` of each group
            survivors = [
                int(offsets[g]) + i
                for g, size in enumerate(keep)
                for i in sorted(self.rng.choice(started[g], size=size, replace=False).tolist())
            ]
            states = torch.full((len(survivors), ctx.policy.model.config.hidden_size), math.nan)
        else:
            states = decision["hidden"][survivors]  # (survivors, C)
            # a row that ended before its check was not checked: the state read there is of an earlier token
            states[full.lengths[survivors].cpu() < self.check_at] = math.nan
        batch = full.take_rows(survivors, full.examples, list(keep), full.prompt_ids)
        batch.attached[HIDDEN_AT_CHECK] = states
        batch.decoded_tokens = float(full.lengths.sum())  # the pruned rollouts' tokens were decoded too
        batch.note("generate", f"kept after the check at {self.check_at} tokens")
        self.last = {"pipeline/generate/pruned": float(sum(started) - sum(keep))}
        return batch

    @torch.no_grad()
    def predict(self, hidden: torch.Tensor) -> torch.Tensor | None:
        """(N,) predicted success of each partial rollout, or None while the head is warming up."""
        if self.head is None or self.trained < self.warmup:
            return None
        return torch.sigmoid(self.head(hidden.cpu())[:, 0])

    def observe(self, batch: RolloutBatch) -> None:
        """Train the head on each survivor's hidden state at the check and that same row's final correctness."""
        x, y = self.training_pairs(batch)
        if not len(x):
            return
        if self.head is None:
            with torch.random.fork_rng():  # its own initial weights: the run's global stream stays put
                torch.manual_seed(self.seed)
                self.head = torch.nn.Linear(x.shape[1], 1)
            self.optimizer = torch.optim.Adam(self.head.parameters(), lr=self.head_lr)
        with torch.no_grad():
            self.last["pipeline/generate/head_accuracy"] = float(
                ((torch.sigmoid(self.head(x)[:, 0]) > 0.5).float() == y).float().mean()
            )
        for _ in range(self.head_steps):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(self.head(x)[:, 0], y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        self.last["pipeline/generate/head_loss"] = float(loss.detach())
        self.trained += 1

    @staticmethod
    def training_pairs(batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(M, C) the states at the check of the rows that have one, and (M,) those same rows' final correctness."""
        states = batch.attached.get(HIDDEN_AT_CHECK)
        if states is None:
            return torch.zeros(0, 0), torch.zeros(0)
        checked = torch.isfinite(states).all(-1)  # (N,) rows that reached the check
        return states[checked].float(), batch.correct.float().cpu()[checked]

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
