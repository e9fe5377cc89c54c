"""PromptHistory: what the run has learned about each training prompt, across steps.

One store per run, updated by the trainer after every scored step with every group
it generated (kept or dropped), read by control and filter components through the
StageContext (`ctx.history`), saved with every checkpoint, and summarised as the
`prompts/...` metrics. Curriculum and allocation methods read it instead of each
keeping its own tally.

    stats = ctx.history.get(example)        # None for a prompt never rolled out
    stats.pass_rate, stats.alpha, stats.beta
    stats.answers["46"]                     # completions of the prompt that answered 46, all steps
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import torch

from workers import metrics as metric
from workers.tasks import Example


@dataclass
class PromptStats:
    """One prompt's record: every visit as (step, correct, samples), and how often each answer was given;
    the rest is derived from them."""

    outcomes: list[tuple[int, int, int]] = field(default_factory=list)
    # answer key (the task's answer_key) -> completions that gave it, over every visit; completions that give
    # no answer are not counted. Empty for batches scored without answers.
    answers: dict[str, int] = field(default_factory=dict)

    @property
    def seen(self) -> int:
        """Steps in which the prompt was rolled out."""
        return len(self.outcomes)

    @property
    def samples(self) -> int:
        return sum(size for _, _, size in self.outcomes)

    @property
    def successes(self) -> int:
        return sum(right for _, right, _ in self.outcomes)

    @property
    def last_step(self) -> int:
        return self.outcomes[-1][0]

    @property
    def last_pass_rate(self) -> float:
        """Share correct the last time it was rolled out."""
        _, right, size = self.outcomes[-1]
        return right / size

    @property
    def pass_rate(self) -> float:
        """Share of all its completions that were correct."""
        return self.successes / self.samples

    @property
    def alpha(self) -> float:
        """Beta posterior of its pass rate from a uniform prior: 1 + successes."""
        return 1.0 + self.successes

    @property
    def beta(self) -> float:
        """1 + failures."""
        return 1.0 + self.samples - self.successes


class PromptHistory:
    def __init__(self):
        self._stats: dict[str, PromptStats] = {}

    def __len__(self) -> int:
        return len(self._stats)

    @staticmethod
    def key(example: Example) -> str:
        return example.prompt

    def get(self, example: Example) -> PromptStats | None:
        return self._stats.get(self.key(example))

    def update(self, batch, step: int) -> None:
        """Count every group of a scored batch (workers.pipeline.batch.RolloutBatch)."""
        correct = batch.group_reduce(batch.correct.float(), "sum").tolist()  # (P,)
        for g, (example, size, right) in enumerate(zip(batch.examples, batch.group_sizes, correct)):
            stats = self._stats.setdefault(self.key(example), PromptStats())
            stats.outcomes.append((step, int(right), size))
            if batch.answers:
                given = Counter(a for a in batch.answers[batch.offsets[g] : batch.offsets[g + 1]] if a is not None)
                stats.answers = dict(Counter(stats.answers) + given)

    def answer_counts(self, batch) -> torch.Tensor:
        """(N,) float: how many completions of each sample's prompt gave the sample's answer, over every
        update so far; 0 for a sample with no answer, or of a prompt never counted."""
        counts = []
        for row, answer in enumerate(batch.answers or [None] * batch.num_samples):
            stats = self.get(batch.example_of(row))
            counts.append(0 if answer is None or stats is None else stats.answers.get(answer, 0))
        return torch.tensor(counts, dtype=torch.float)

    def metrics(self) -> dict[str, float]:
        """prompts/...: how many distinct prompts the run has rolled out, and how they fare."""
        if not self._stats:
            return {metric.PROMPTS_DISTINCT: 0.0}
        records = list(self._stats.values())
        last = torch.tensor([r.last_pass_rate for r in records])
        return {
            metric.PROMPTS_DISTINCT: float(len(records)),
            metric.PROMPTS_REVISITED: float(sum(r.seen > 1 for r in records)),
            metric.PROMPTS_MEAN_PASS_RATE: float(last.mean()),
            metric.PROMPTS_FRAC_SOLVED: float((last == 1).float().mean()),
            metric.PROMPTS_FRAC_UNSOLVED: float((last == 0).float().mean()),
        }

    def state_dict(self) -> dict[str, dict]:
        return {key: asdict(stats) for key, stats in self._stats.items()}

    def load_state_dict(self, state: dict[str, dict]) -> None:
        self._stats = {
            key: PromptStats([tuple(o) for o in stats["outcomes"]], dict(stats.get("answers", {})))
            for key, stats in state.items()
        }
