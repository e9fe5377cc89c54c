"""RolloutBatch: the groups of completions that flow through the pipeline stages.

Samples are stored flat and prompt-major: N = P groups x n samples, and the
samples of group g are rows g*n .. g*n+n-1. Every group in a batch has the same
size n; `group(x)` views a per-sample tensor as (P, n).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from workers.tasks import Example


@dataclass
class RolloutBatch:
    examples: list[Example]  # P: one per group
    group_size: int  # n
    prompt_ids: list[list[int]]  # P
    tokens: torch.Tensor  # (N, T) long
    logprobs: torch.Tensor  # (N, T) sampling policy's log-probabilities
    mask: torch.Tensor  # (N, T) 1 on completion tokens
    truncated: torch.Tensor  # (N,) bool
    texts: list[str]  # N decoded completions
    born_step: int  # the step whose policy sampled these groups (replay makes it older)
    rewards: torch.Tensor | None = None  # (N,) weighted sum
    reward_parts: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (N,)
    correct: torch.Tensor | None = None  # (N,) bool
    advantages: torch.Tensor | None = None  # (N,)
    in_loss: torch.Tensor | None = None  # (N,) bool: may carry gradient (set by the filter, narrowed by the advantage)
    notes: list[dict[str, str]] = field(default_factory=list)  # N: what each stage did to the sample

    @property
    def num_groups(self) -> int:
        return len(self.examples)

    @property
    def num_samples(self) -> int:
        return self.tokens.shape[0]

    @property
    def lengths(self) -> torch.Tensor:  # (N,)
        return self.mask.sum(-1)

    def group(self, values: torch.Tensor) -> torch.Tensor:
        """(N,) -> (P, n)."""
        return values.view(self.num_groups, self.group_size)

    def note(self, stage: str, what: str, groups: list[int] | None = None) -> None:
        """Record what `stage` did, for every sample or for those of the given groups."""
        rows = range(self.num_samples) if groups is None else self.rows_of(groups)
        for row in rows:
            self.notes[row][stage] = what

    def rows_of(self, groups: list[int]) -> list[int]:
        n = self.group_size
        return [g * n + i for g in groups for i in range(n)]

    def select_groups(self, groups: list[int]) -> RolloutBatch:
        rows = torch.tensor(self.rows_of(groups), dtype=torch.long)
        pick = lambda x: None if x is None else x[rows.to(x.device)]  # noqa: E731
        return RolloutBatch(
            examples=[self.examples[g] for g in groups],
            group_size=self.group_size,
            prompt_ids=[self.prompt_ids[g] for g in groups],
            tokens=pick(self.tokens),
            logprobs=pick(self.logprobs),
            mask=pick(self.mask),
            truncated=pick(self.truncated),
            texts=[self.texts[r] for r in rows.tolist()],
            born_step=self.born_step,
            rewards=pick(self.rewards),
            reward_parts={k: pick(v) for k, v in self.reward_parts.items()},
            correct=pick(self.correct),
            advantages=pick(self.advantages),
            in_loss=pick(self.in_loss),
            notes=[dict(self.notes[r]) for r in rows.tolist()],
        )

    @staticmethod
    def concat(batches: list[RolloutBatch]) -> RolloutBatch:
        """Join batches of equal group size; completions are right-padded to the longest."""
        nonempty = [b for b in batches if b.num_groups]
        if len(nonempty) <= 1:
            return nonempty[0] if nonempty else batches[0]
        batches = nonempty
        width = max(b.tokens.shape[1] for b in batches)
        pad = lambda x, value=0: F.pad(x, (0, width - x.shape[1]), value=value)  # noqa: E731
        cat = lambda xs: None if any(x is None for x in xs) else torch.cat(xs)  # noqa: E731
        first = batches[0]
        return RolloutBatch(
            examples=[e for b in batches for e in b.examples],
            group_size=first.group_size,
            prompt_ids=[p for b in batches for p in b.prompt_ids],
            tokens=torch.cat([pad(b.tokens) for b in batches]),
            logprobs=torch.cat([pad(b.logprobs) for b in batches]),
            mask=torch.cat([pad(b.mask) for b in batches]),
            truncated=torch.cat([b.truncated for b in batches]),
            texts=[t for b in batches for t in b.texts],
            born_step=min(b.born_step for b in batches),
            rewards=cat([b.rewards for b in batches]),
            reward_parts={k: torch.cat([b.reward_parts[k] for b in batches]) for k in first.reward_parts},
            correct=cat([b.correct for b in batches]),
            advantages=cat([b.advantages for b in batches]),
            in_loss=cat([b.in_loss for b in batches]),
            notes=[n for b in batches for n in b.notes],
        )
