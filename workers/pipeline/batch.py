"""RolloutBatch: the groups of completions that flow through the pipeline stages.

Samples are stored flat and prompt-major: N samples in P groups, and the samples
of group g are rows offsets[g] .. offsets[g+1]-1. Groups may differ in size (a
control stage can give a hard prompt 16 rollouts and an easy one 2), so every
per-group computation goes through one of three views:

    batch.group(values)          # (P, n): only when every group has n samples
    batch.by_size()              # [(groups, rows (P_k, n_k))]: groups of equal size stacked
    batch.group_reduce(x, "amax")  # (P,): a reduction within each group, any sizes

`by_size` lets any estimator written for a (P, n) matrix run unchanged on ragged
batches: it sees each size class as one matrix, and a group's result never
depends on which other groups share the batch.

A group may also grow after it was scored: `batch.add_to_groups(groups, extra)`
appends the samples of a later rollout stage (a control stage's `extend`) to their
groups, keeping each group's rows contiguous.

Every per-row field travels with its row through `take_rows`, `select_groups`, `concat` and
`add_to_groups`: among them `versions`, the policy version that sampled each row, by which the
asynchronous trainer bounds how stale a sample may be when it reaches the loss (and the objective
gives a stale row its decoupled correction), `logprobs`, the log-probabilities of the policy that
sampled each token, and `attached`, what a component keeps of each row it made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import torch
import torch.nn.functional as F

from workers.tasks import Example


@dataclass
class RolloutBatch:
    examples: list[Example]  # P: one per group
    group_sizes: list[int]  # P: samples in each group
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
    # N: the answer each completion commits to, the task's answer_key (None: it gives none, or was cut off by
    # max_new_tokens); filled when scored
    answers: list[str | None] = field(default_factory=list)
    advantages: torch.Tensor | None = None  # (N,) per sample, or (N, T) per token
    in_loss: torch.Tensor | None = None  # (N,) bool: may carry gradient (set by the filter, narrowed by the advantage)
    notes: list[dict[str, str]] = field(default_factory=list)  # N: what each stage did to the sample
    weights: torch.Tensor | None = None  # (N,) importance weight of each sample's loss (None: all 1)
    token_mask: torch.Tensor | None = None  # (N, T) bool: tokens that may carry gradient (set by the advantage)
    decoded_tokens: float | None = None  # tokens the sampler decoded for this batch, if not its completions' lengths
    # (N, T) the reference policy's log-probabilities of the completion tokens (0 off the completion); filled by
    # the trainer before the advantage stage only when a component declares needs=("ref_logprobs",)
    ref_logprobs: torch.Tensor | None = None
    # (N,) how many completions of each sample's prompt, over the whole run so far (this step included), gave
    # the sample's answer (0 for no answer); filled from the prompt history before the advantage stage only
    # when a component declares needs=("answer_counts",)
    answer_counts: torch.Tensor | None = None
    # (N,) long: the version of the policy that sampled each row (RL steps it had been trained for); the
    # trainer stamps fresh rows, replayed rows keep theirs (workers/training/asynchronous.py bounds the difference)
    versions: torch.Tensor | None = None
    # name -> (N, ...) per-row tensors a component attached to the rows it made (arrol's hidden state at its
    # check), so that whatever later joins, regroups or drops rows, each row's own value stays with it
    attached: dict[str, torch.Tensor] = field(default_factory=dict)
    # multi-turn episodes (workers/environments): (N, T) bool, the completion tokens the policy wrote; the others
    # are the environment's observations, attended by what follows but never in the loss. None: every completion
    # token is the policy's (a single-turn rollout)
    policy_tokens: torch.Tensor | None = None
    # N: each row's episode (workers.environments.episodes.EpisodeRecord: its turns, their rewards and states);
    # None for single-turn rollouts
    episodes: list | None = None

    @property
    def decoded(self) -> float:
        """Tokens decoded to produce the batch: its completion lengths, unless the generate component
        says otherwise (APRIL decodes tokens for completions that finish in a later step)."""
        return float(self.lengths.sum()) if self.decoded_tokens is None else self.decoded_tokens

    def staleness(self, learner_version: int) -> torch.Tensor:
        """(N,) long: how many versions older than the learner the policy that sampled each row is (0 unstamped)."""
        if self.versions is None:
            return torch.zeros(self.num_samples, dtype=torch.long)
        return (learner_version - self.versions).clamp(min=0)

    @property
    def num_groups(self) -> int:
        return len(self.examples)

    @property
    def num_samples(self) -> int:
        return self.tokens.shape[0]

    @property
    def lengths(self) -> torch.Tensor:  # (N,)
        return self.mask.sum(-1)

    @property
    def group_size(self) -> int:
        """The size every group shares; a batch of ragged groups has none (use group_sizes)."""
        sizes = set(self.group_sizes)
        if len(sizes) != 1:
            raise ValueError(f"groups of sizes {sorted(sizes)} have no common size; use group_sizes")
        return sizes.pop()

    @cached_property
    def offsets(self) -> list[int]:
        """P + 1 row offsets: group g holds rows offsets[g] .. offsets[g+1]-1."""
        out = [0]
        for size in self.group_sizes:
            out.append(out[-1] + size)
        return out

    @cached_property
    def group_index(self) -> torch.Tensor:
        """(N,) long: the group of every row."""
        return torch.repeat_interleave(torch.arange(self.num_groups), torch.tensor(self.group_sizes, dtype=torch.long))

    def example_of(self, row: int) -> Example:
        return self.examples[int(self.group_index[row])]

    def group(self, values: torch.Tensor) -> torch.Tensor:
        """(N,) -> (P, n), for a batch whose groups all have n samples."""
        return values.view(self.num_groups, self.group_size)

    def by_size(self) -> list[tuple[list[int], torch.Tensor]]:
        """For each group size: the groups of that size, and their rows as a (P_k, n_k) index matrix."""
        classes: dict[int, list[int]] = {}
        for g, size in enumerate(self.group_sizes):
            classes.setdefault(size, []).append(g)
        return [
            (groups, torch.tensor([list(range(self.offsets[g], self.offsets[g + 1])) for g in groups]))
            for _, groups in sorted(classes.items())
        ]

    def group_reduce(self, values: torch.Tensor, how: str) -> torch.Tensor:
        """(N,) -> (P,): "sum", "mean", "amax" or "amin" over each group's samples."""
        out = torch.zeros(self.num_groups, dtype=values.dtype, device=values.device)
        index = self.group_index.to(values.device)
        return out.scatter_reduce(0, index, values, reduce=how, include_self=False)

    def note(self, stage: str, what: str, groups: list[int] | None = None) -> None:
        """Record what `stage` did, for every sample or for those of the given groups."""
        rows = range(self.num_samples) if groups is None else self.rows_of(groups)
        for row in rows:
            self.notes[row][stage] = what

    def rows_of(self, groups: list[int]) -> list[int]:
        return [row for g in groups for row in range(self.offsets[g], self.offsets[g + 1])]

    def sample_advantages(self) -> torch.Tensor:
        """(N,): each sample's advantage; a per-token advantage is averaged over the tokens the policy wrote (a
        multi-turn episode's observations, which carry none, are left out)."""
        if self.advantages.dim() == 1:
            return self.advantages
        mask = self.trained_tokens().to(self.advantages.device)
        return (self.advantages * mask).sum(-1) / mask.sum(-1).clamp(min=1)

    def select_groups(self, groups: list[int]) -> RolloutBatch:
        return self.take_rows(
            self.rows_of(groups),
            examples=[self.examples[g] for g in groups],
            group_sizes=[self.group_sizes[g] for g in groups],
            prompt_ids=[self.prompt_ids[g] for g in groups],
        )

    def add_to_groups(self, groups: list[int], extra: RolloutBatch) -> RolloutBatch:
        """This batch with extra's group k appended to group groups[k]; the other groups unchanged.

        Each grown group keeps its rows contiguous (its old samples, then the new ones), so
        `offsets`, `by_size` and every per-group estimator see it as one group of the summed
        size, exactly as if it had been sampled at once. Both batches must be scored and not yet
        filtered; completions are right-padded to the longer width.
        """
        if len(set(groups)) != len(groups) or len(groups) != extra.num_groups:
            raise ValueError(f"{extra.num_groups} extra groups cannot join the distinct groups {groups}")
        if any(extra.examples[k] != self.examples[g] for k, g in enumerate(groups)):
            raise ValueError("an extra group must hold samples of the prompt of the group it joins")
        if not groups:
            return self
        joined = RolloutBatch.concat([self, extra])  # rows: all of self's, then all of extra's
        added = {g: range(self.num_samples + extra.offsets[k], self.num_samples + extra.offsets[k + 1])
                 for k, g in enumerate(groups)}  # fmt: skip
        order, sizes = [], []
        for g in range(self.num_groups):
            own = range(self.offsets[g], self.offsets[g + 1])
            order += [*own, *added.get(g, ())]
            sizes.append(len(own) + len(added.get(g, ())))
        return joined.take_rows(order, list(self.examples), sizes, list(self.prompt_ids))

    def take_rows(
        self, rows: list[int], examples: list[Example], group_sizes: list[int], prompt_ids: list[list[int]]
    ) -> RolloutBatch:
        """A batch of the given rows, in order, regrouped as `group_sizes` (the caller keeps groups contiguous)."""
        rows = torch.tensor(rows, dtype=torch.long)
        pick = lambda x: None if x is None else x[rows.to(x.device)]  # noqa: E731
        return RolloutBatch(
            examples=examples,
            group_sizes=group_sizes,
            prompt_ids=prompt_ids,
            tokens=pick(self.tokens),
            logprobs=pick(self.logprobs),
            mask=pick(self.mask),
            truncated=pick(self.truncated),
            texts=[self.texts[r] for r in rows.tolist()],
            born_step=self.born_step,
            rewards=pick(self.rewards),
            reward_parts={k: pick(v) for k, v in self.reward_parts.items()},
            correct=pick(self.correct),
            answers=[self.answers[r] for r in rows.tolist()] if self.answers else [],
            advantages=pick(self.advantages),
            in_loss=pick(self.in_loss),
            token_mask=pick(self.token_mask),
            weights=pick(self.weights),
            notes=[dict(self.notes[r]) for r in rows.tolist()],
            ref_logprobs=pick(self.ref_logprobs),
            answer_counts=pick(self.answer_counts),
            versions=pick(self.versions),
            attached={name: pick(values) for name, values in self.attached.items()},
            policy_tokens=pick(self.policy_tokens),
            episodes=None if self.episodes is None else [self.episodes[r] for r in rows.tolist()],
        )

    def trained_tokens(self) -> torch.Tensor:
        """(N, T): 1 on the completion tokens the policy wrote (all of them but a multi-turn episode's
        observations), in mask's dtype."""
        if self.policy_tokens is None:
            return self.mask
        return self.mask * self.policy_tokens.to(self.mask.device, self.mask.dtype)

    @staticmethod
    def concat(batches: list[RolloutBatch]) -> RolloutBatch:
        """Join batches, whatever their group sizes; completions are right-padded to the longest."""
        nonempty = [b for b in batches if b.num_groups]
        if len(nonempty) <= 1:
            return nonempty[0] if nonempty else batches[0]
        batches = nonempty
        width = max(b.tokens.shape[1] for b in batches)
        pad = lambda x, value=0: F.pad(x, (0, width - x.shape[1]), value=value)  # noqa: E731
        cat = lambda xs: None if any(x is None for x in xs) else torch.cat(xs)  # noqa: E731
        first = batches[0]
        advantages = [b.advantages for b in batches]
        if all(a is not None and a.dim() == 2 for a in advantages):
            advantages = [pad(a) for a in advantages]
        return RolloutBatch(
            examples=[e for b in batches for e in b.examples],
            group_sizes=[n for b in batches for n in b.group_sizes],
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
            # a batch scored without answers (a constructed one) leaves the joined batch without them
            answers=[a for b in batches for a in b.answers] if all(b.answers for b in batches) else [],
            advantages=cat(advantages),
            in_loss=cat([b.in_loss for b in batches]),
            weights=(
                None
                if all(b.weights is None for b in batches)
                else torch.cat([torch.ones(b.num_samples) if b.weights is None else b.weights for b in batches])
            ),
            notes=[n for b in batches for n in b.notes],
            decoded_tokens=(
                None if all(b.decoded_tokens is None for b in batches) else sum(b.decoded for b in batches)
            ),
            ref_logprobs=cat([None if b.ref_logprobs is None else pad(b.ref_logprobs) for b in batches]),
            answer_counts=cat([b.answer_counts for b in batches]),
            versions=cat([b.versions for b in batches]),
            attached=joined_attachments(batches),
            policy_tokens=(
                None
                if all(b.policy_tokens is None for b in batches)
                else torch.cat([pad(b.trained_tokens().bool()) for b in batches])
            ),
            episodes=None if any(b.episodes is None for b in batches) else [e for b in batches for e in b.episodes],
        )


def joined_attachments(batches: list[RolloutBatch]) -> dict[str, torch.Tensor]:
    """Each attached name's rows of every batch, in order; a batch without the name gives NaN rows of its shape."""
    out = {}
    for name in dict.fromkeys(name for b in batches for name in b.attached):
        shape = next(b.attached[name] for b in batches if name in b.attached)
        out[name] = torch.cat(
            [
                b.attached[name] if name in b.attached
                else torch.full((b.num_samples, *shape.shape[1:]), math.nan, dtype=shape.dtype, device=shape.device)
                for b in batches
            ]
        )  # fmt: skip
    return out
