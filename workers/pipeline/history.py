"""PromptHistory: what the run has learned about each training prompt, across steps.

One store per run, updated by the trainer after every scored step with every group
it generated (kept or dropped), read by control and filter components through the
StageContext (`ctx.history`), saved with every checkpoint, and summarised as the
`prompts/...` metrics. Curriculum and allocation methods read it instead of each
keeping its own tally.

    stats = ctx.history.get(example)        # None for a prompt never rolled out
    stats.pass_rate, stats.alpha, stats.beta
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from workers.tasks import Example


@dataclass
class PromptStats:
    """One prompt's record. alpha/beta: a Beta posterior of its pass rate from a uniform prior."""

    seen: int = 0  # steps in which the prompt was rolled out
    samples: int = 0  # completions scored
    successes: int = 0  # of them correct
    last_pass_rate: float = 0.0  # share correct the last time it was rolled out
    last_step: int = 0
    alpha: float = 1.0
    beta: float = 1.0
    outcomes: list[tuple[int, int, int]] = field(default_factory=list)  # (step, correct, samples) per visit

    @property
    def pass_rate(self) -> float:
        """Share of all its completions that were correct."""
        return self.successes / self.samples if self.samples else 0.0

    @property
    def posterior_mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)


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
        for example, size, right in zip(batch.examples, batch.group_sizes, correct):
            stats = self._stats.setdefault(self.key(example), PromptStats())
            right = int(right)
            stats.seen += 1
            stats.samples += size
            stats.successes += right
            stats.last_pass_rate = right / size
            stats.last_step = step
            stats.alpha += right
            stats.beta += size - right
            stats.outcomes.append((step, right, size))

    def metrics(self) -> dict[str, float]:
        """prompts/...: how many distinct prompts the run has rolled out, and how they fare."""
        if not self._stats:
            return {"prompts/distinct": 0.0}
        records = list(self._stats.values())
        last = torch.tensor([r.last_pass_rate for r in records])
        return {
            "prompts/distinct": float(len(records)),
            "prompts/revisited": float(sum(r.seen > 1 for r in records)),
            "prompts/mean_pass_rate": float(last.mean()),
            "prompts/frac_solved": float((last == 1).float().mean()),
            "prompts/frac_unsolved": float((last == 0).float().mean()),
        }

    def state_dict(self) -> dict[str, dict]:
        return {key: asdict(stats) for key, stats in self._stats.items()}

    def load_state_dict(self, state: dict[str, dict]) -> None:
        self._stats = {
            key: PromptStats(**{**stats, "outcomes": [tuple(o) for o in stats.get("outcomes", [])]})
            for key, stats in state.items()
        }
