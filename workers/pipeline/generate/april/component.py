"""`april`: over-provision rollouts, stop once enough groups are finished, continue the rest next step.

APRIL ("Active Partial Rollouts in Reinforcement Learning to Tame Long-tail Generation", 2025): a step's generation
is as slow as its longest completion, so a long tail of lengths leaves the sampler idle. APRIL
asks for more groups than the step trains on, stops generating as soon as the step's number of
groups is finished, and keeps every unfinished completion, with its tokens and sampler
log-probabilities, to continue from where it stopped in a later step. Nothing is discarded.

Multi-turn episodes (an environment) are pooled the same way at the grain of a turn (workers/environments/pool.py):
the step stops after the turn at which its number of groups is over, and an episode still going is carried over at
its turn boundary with its environment's state, to take its next turn in a later step. So a short episode never
waits for the longest one of its batch (generate.check_every does not apply: the check is after every turn).

A group is finished when every one of its completions has ended (end-of-sequence or its length
limit); groups are returned whole, since their advantages are relative to the group. Carried
groups come first in the next step's pool, so none waits for ever; finished groups beyond the
step's count also wait in the pool, already complete, and are returned first next time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from workers.environments.episodes import Sampler
from workers.environments.pool import EpisodePool, PooledEpisodes
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.april import APRILKnobs
from workers.pipeline.generate.base import episode_batch
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.rollout import Generations, Partial, Prefix, SamplingParams, StopRule
from workers.tasks import Example


@dataclass
class Completion:
    """One completion of a group in the pool: its tokens so far, and whether it has ended."""

    tokens: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    ended: bool = False
    truncated: bool = False
    resumed: int = 0  # times it was continued from a stored prefix


@dataclass
class PooledGroup:
    example: Example
    prompt_ids: list[int]
    limit: int  # completion-length limit of its rows
    born_step: int  # the step whose policy began it
    born_version: int  # that policy's version: the oldest of its rows' tokens were sampled by it
    rows: list[Completion]

    @property
    def finished(self) -> bool:
        return all(row.ended for row in self.rows)


class ActivePartialRollouts(GenerateStage):
    """Over-provision groups, stop when the step's groups are finished, continue unfinished completions later (APRIL).

    Knobs: generate.oversample, generate.check_every. Reports pipeline/generate/carried_groups
    (groups left in the pool for later steps), pipeline/generate/resumed_rows (completions
    continued from a stored prefix), pipeline/generate/stopped_rows, pipeline/generate/decoded_tokens;
    of episodes, pipeline/generate/turn_calls (turns generated: calls of the backend) in place of stopped_rows.
    """

    Knobs = APRILKnobs

    def __init__(self, cfg):
        self.oversample, self.check_every = cfg.generate.oversample, cfg.generate.check_every
        self.pool: list[PooledGroup] = []  # carried groups, oldest first
        self.episode_pool = EpisodePool()  # the same, of multi-turn episodes
        self.last: dict[str, float] = {}

    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        if ctx.environment is not None:
            return self.episodes(ctx, examples, budget)
        wanted = len(examples)
        self.pool += self.new_groups(ctx, examples, budget)
        top_up = math.ceil(self.oversample * wanted) - len(self.pool)
        if top_up > 0 and ctx.draw is not None:
            self.pool += self.new_groups(ctx, *ctx.draw(top_up))
        out, sent = self.continue_pool(ctx, wanted)
        carried = sum(len(row.tokens) for _, row in sent)  # tokens the rows sent already had
        resumed = sum(1 for _, row in sent if row.tokens)
        self.absorb(out, sent)
        done = [g for g in self.pool if g.finished][:wanted]  # oldest first
        self.pool = [g for g in self.pool if not any(g is d for d in done)]
        self.last = {
            "pipeline/generate/carried_groups": float(len(self.pool)),
            "pipeline/generate/resumed_rows": float(resumed),
            "pipeline/generate/stopped_rows": float(out.stopped.sum()),
            "pipeline/generate/decoded_tokens": float(out.lengths.sum()) - carried,
        }
        return self.to_batch(ctx, done)

    @staticmethod
    def new_groups(ctx: StageContext, examples: list[Example], budget: Budget) -> list[PooledGroup]:
        sizes, limits = budget.sizes(len(examples)), budget.limits(len(examples))
        return [
            PooledGroup(
                e, ctx.policy.encode_prompt(e.prompt), limit, ctx.step, ctx.version, [Completion() for _ in range(size)]
            )  # fmt: skip
            for e, size, limit in zip(examples, sizes, limits)
        ]

    def continue_pool(self, ctx: StageContext, wanted: int) -> tuple[Generations, list]:
        """One generation over every unended completion of the pool, stopped once `wanted` groups are finished.

        Returns the backend's output and, per row sent, (its group, its Completion as it was)."""
        sent = [(g, row) for g in self.pool for row in g.rows if not row.ended]
        groups = [g for g in self.pool if any(not row.ended for row in g.rows)]
        if not sent:
            empty = torch.zeros(0, 0)
            return Generations(empty.long(), empty, empty, torch.zeros(0, dtype=torch.bool)), sent
        prefixes = [Prefix(row.tokens, row.logprobs) if row.tokens else None for _, row in sent]
        out = ctx.backend.generate(
            [g.prompt_ids for g in groups],
            [sum(not row.ended for row in g.rows) for g in groups],
            SamplingParams(max(g.limit for g in groups), ctx.temperature, ctx.top_p, ctx.top_k),
            ctx.generator,
            limits=[g.limit for g in groups],
            prefixes=prefixes if any(prefixes) else None,
            stop=StopRule(abort=self.stop_when_finished(sent, wanted), every=self.check_every),
        )
        return out, sent

    def stop_when_finished(self, sent, wanted: int):
        """The abort predicate: once `wanted` groups of the pool are finished, stop every unended row."""
        group_ids = {id(g): i for i, g in enumerate(self.pool)}
        owner = torch.tensor([group_ids[id(g)] for g, _ in sent])  # (R,)
        carried = torch.tensor([len(row.tokens) for _, row in sent])  # (R,)
        limit = torch.tensor([g.limit for g, _ in sent])  # (R,)
        ended_before = torch.tensor([sum(r.ended for r in g.rows) for g in self.pool])  # (G,)
        sizes = torch.tensor([len(g.rows) for g in self.pool])  # (G,)

        def abort(partial: Partial) -> torch.Tensor:
            # a row is over at end-of-sequence or once it has reached its limit with this token
            over = partial.finished.cpu() | (carried + partial.tokens.shape[1] >= limit)
            ended = ended_before.index_add(0, owner, over.long())
            if int((ended == sizes).sum()) >= wanted:
                return ~over
            return torch.zeros_like(over)

        return abort

    def absorb(self, out: Generations, sent) -> None:
        """Write each row's tokens so far back into its Completion in the pool."""
        lengths, stopped, truncated = out.lengths.tolist(), out.stopped.tolist(), out.truncated.tolist()
        tokens, logprobs = out.tokens.cpu(), out.logprobs.cpu()
        for r, (_, row) in enumerate(sent):
            n = lengths[r]
            row.resumed += bool(row.tokens)
            row.tokens = tuple(tokens[r, :n].tolist())
            row.logprobs = tuple(logprobs[r, :n].tolist())
            row.ended, row.truncated = not stopped[r], bool(truncated[r]) and not stopped[r]

    def to_batch(self, ctx: StageContext, groups: list[PooledGroup]) -> RolloutBatch:
        rows = [(g, row) for g in groups for row in g.rows]
        width = max([len(row.tokens) for _, row in rows] + [1])
        tokens = torch.full((len(rows), width), ctx.policy.pad_id, dtype=torch.long)
        logprobs, mask = torch.zeros(len(rows), width), torch.zeros(len(rows), width)
        for r, (_, row) in enumerate(rows):
            n = len(row.tokens)
            tokens[r, :n], logprobs[r, :n], mask[r, :n] = torch.tensor(row.tokens), torch.tensor(row.logprobs), 1
        truncated = torch.tensor([row.truncated for _, row in rows], dtype=torch.bool)
        device = ctx.policy.device
        generations = Generations(tokens.to(device), logprobs.to(device), mask.to(device), truncated.to(device))
        batch = RolloutBatch(
            examples=[g.example for g in groups],
            group_sizes=[len(g.rows) for g in groups],
            prompt_ids=[g.prompt_ids for g in groups],
            tokens=generations.tokens,
            logprobs=generations.logprobs,
            mask=generations.mask,
            truncated=generations.truncated,
            texts=ctx.policy.decode_completions(generations),
            born_step=min([g.born_step for g in groups], default=ctx.step),
            notes=[
                {"generate": f"begun at step {g.born_step}, continued {row.resumed}x" if row.resumed else "sampled"}
                for g, row in rows
            ],
        )
        # a continued row holds tokens of several versions: it is as old as its oldest (the asynchronous trainer's
        # staleness bound drops it when that is too old)
        batch.versions = torch.tensor([g.born_version for g, _ in rows], dtype=torch.long)
        batch.decoded_tokens = self.last["pipeline/generate/decoded_tokens"]
        return batch

    def episodes(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        """The step's groups of episodes: the first `len(examples)` groups of the pool to be over, after the turn at
        which they were; the pool topped up with new groups first, as for completions."""
        wanted, pool = len(examples), self.episode_pool
        pool.start(self.new_episode_groups(ctx, examples, budget))
        top_up = math.ceil(self.oversample * wanted) - len(pool.groups)
        if top_up > 0 and ctx.draw is not None:
            pool.start(self.new_episode_groups(ctx, *ctx.draw(top_up)))
        params = SamplingParams(budget.max_new_tokens, ctx.temperature, ctx.top_p, ctx.top_k)
        finished = pool.play(Sampler(ctx.policy, ctx.backend, ctx.generator), ctx.environment, params, wanted)
        groups = finished.groups
        batch = episode_batch(ctx, [g.example for g in groups], [g.size for g in groups],
                              [g.prompt_ids for g in groups], finished.episodes)  # fmt: skip
        batch.born_step = min([g.step for g in groups], default=ctx.step)
        batch.versions = torch.tensor([g.version for g in groups for _ in range(g.size)], dtype=torch.long)
        batch.notes = [
            {"generate": f"begun at step {g.step}, carried {g.continued}x" if g.continued else "sampled"}
            for g in groups
            for _ in range(g.size)
        ]
        self.last = {
            "pipeline/generate/carried_groups": float(finished.carried),
            "pipeline/generate/resumed_rows": float(finished.resumed),
            "pipeline/generate/turn_calls": float(finished.turns),
            "pipeline/generate/decoded_tokens": float(finished.episodes.decoded),
        }
        return batch

    @staticmethod
    def new_episode_groups(ctx: StageContext, examples: list[Example], budget: Budget) -> list[PooledEpisodes]:
        sizes, limits = budget.sizes(len(examples)), budget.limits(len(examples))
        return [
            PooledEpisodes(e, ctx.policy.encode_prompt(e.prompt), limit, size, ctx.step, ctx.version)
            for e, size, limit in zip(examples, sizes, limits)
        ]

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
