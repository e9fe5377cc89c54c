"""`latr`: grow each group as a tree: branch at uncertain tokens, look ahead, prune branches that stay alike.

LATR (Lookahead Tree-Based Rollouts, 2025; the seed list, "Lookahead Tree-Based Rollouts for
Enhanced Trajectory-Level Exploration in RLVR"). Independent samples of one prompt often differ
in a token or two and then collapse into the same reasoning path, so the group's rewards agree
and its advantages vanish. LATR makes the group's trajectories differ on purpose, repeating three
stages while decoding:

1. branching: where the policy is uncertain — the most likely token other than the one just
   sampled has probability at least `branch_threshold` — a new branch continues from the same
   prefix with that other token, while the group has fewer than G leaves;
2. lookahead: the new branch is decoded on for `lookahead` tokens alongside its sibling;
3. pruning: if over those tokens it stayed too similar to its sibling (at least `similarity` of
   the positions hold the same token), it is pruned.

Groups still short of G leaves at the end are topped up with ordinary samples. Every token's
log-probability is the policy's at the sampling temperature, so the trainer's ratio is right; a
branch's first token was chosen, not drawn from the policy, which is the bias the method accepts
for its diversity (the card says so).

The decoding loop runs the policy itself without a KV cache (one forward over every live branch
per token), which is cheap for the short completions of the built-in tasks and slow for long
ones; it is the mechanism, not a fast sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.base import decoded_batch, sample_groups
from workers.pipeline.generate.latr import LATRKnobs
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.rollout import Generations
from workers.rollout.hf import left_pad, restrict
from workers.tasks import Example


@dataclass
class Branch:
    group: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    ended: bool = False
    truncated: bool = False
    sibling: Branch | None = None  # the branch it split from, while it is being looked ahead
    split_at: int = 0  # its length when it split off


class LookaheadTreeRollouts(GenerateStage):
    """Branch at uncertain tokens into other candidates, look ahead, prune branches that stay alike (LATR).

    Knobs: generate.branch_threshold, lookahead, similarity, roots. Reports
    pipeline/generate/branches (branches started this step), pipeline/generate/pruned and
    pipeline/generate/topped_up (ordinary samples added to groups short of G).
    """

    Knobs = LATRKnobs

    def __init__(self, cfg):
        g = cfg.generate
        self.threshold, self.lookahead, self.similarity, self.roots = (
            g.branch_threshold,
            g.lookahead,
            g.similarity,
            g.roots,
        )
        self.last: dict[str, float] = {}

    @torch.no_grad()
    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        sizes, limits = budget.sizes(len(examples)), budget.limits(len(examples))
        prompts = [ctx.policy.encode_prompt(e.prompt) for e in examples]
        branches = [Branch(g) for g, size in enumerate(sizes) for _ in range(min(self.roots, size))]
        counts = {"branches": 0, "pruned": 0}
        model = ctx.policy.model
        was_training = model.training
        model.eval()
        for _ in range(max(limits)):
            live = [b for b in branches if not b.ended]
            if not live:
                break
            self.step(ctx, live, prompts, sizes, limits, branches, counts)
        model.train(was_training)
        batch = self.to_batch(ctx, examples, prompts, sizes, branches)
        short = {g: sizes[g] - sum(b.group == g for b in branches) for g in range(len(examples))}
        topped = sum(short.values())
        if topped:
            batch = self.top_up(ctx, examples, budget, batch, short)
        self.last = {
            "pipeline/generate/branches": float(counts["branches"]),
            "pipeline/generate/pruned": float(counts["pruned"]),
            "pipeline/generate/topped_up": float(topped),
        }
        return batch

    def step(self, ctx, live, prompts, sizes, limits, branches, counts) -> None:
        """One token for every live branch; new branches where the policy is uncertain; prune look-alikes."""
        logp = self.next_token_logprobs(ctx, [prompts[b.group] + b.tokens for b in live])  # (R, V)
        narrowed = restrict(logp.clone(), ctx.top_k, ctx.top_p)
        drawn = torch.multinomial(torch.softmax(narrowed, -1), 1, generator=ctx.generator)[:, 0].cpu()
        logp = logp.cpu()
        for i, b in enumerate(live):
            token = int(drawn[i])
            others = logp[i].clone()
            others[token] = float("-inf")
            alternative = int(others.argmax())
            leaves = sum(x.group == b.group for x in branches)
            if float(others[alternative].exp()) >= self.threshold and leaves < sizes[b.group]:
                twin = Branch(b.group, list(b.tokens), list(b.logprobs), sibling=b, split_at=len(b.tokens))
                self.extend(twin, alternative, float(logp[i, alternative]), ctx, limits)
                branches.append(twin)
                counts["branches"] += 1
            self.extend(b, token, float(logp[i, token]), ctx, limits)
        for b in list(branches):
            if b.sibling is not None and len(b.tokens) - b.split_at >= self.lookahead + 1:
                if self.alike(b):
                    branches.remove(b)
                    counts["pruned"] += 1
                else:
                    b.sibling = None  # it has diverged: a leaf of its own from now on

    def alike(self, b: Branch) -> bool:
        """Whether the branch's lookahead tokens (after its first) match its sibling's at `similarity` or more."""
        start, end = b.split_at + 1, b.split_at + 1 + self.lookahead
        mine, theirs = b.tokens[start:end], b.sibling.tokens[start:end]
        same = sum(x == y for x, y in zip(mine, theirs))
        return same >= self.similarity * self.lookahead

    @staticmethod
    def extend(b: Branch, token: int, logprob: float, ctx, limits) -> None:
        b.tokens.append(token)
        b.logprobs.append(logprob)
        if token == ctx.policy.eos_id:
            b.ended = True
        elif len(b.tokens) >= limits[b.group]:
            b.ended, b.truncated = True, True

    @staticmethod
    def next_token_logprobs(ctx, rows: list[list[int]]) -> torch.Tensor:
        """(R, V) log pi(next token | row) at the sampling temperature."""
        input_ids, attention = left_pad(rows, ctx.policy.pad_id, ctx.policy.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        with ctx.policy.computing():
            logits = ctx.policy.model(
                input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=1
            ).logits[:, -1]
        return torch.log_softmax(logits.float() / ctx.temperature, dim=-1)

    @staticmethod
    def to_batch(ctx, examples, prompts, sizes, branches) -> RolloutBatch:
        ordered = sorted(branches, key=lambda b: b.group)  # groups contiguous, in prompt order
        width = max([len(b.tokens) for b in ordered] + [1])
        tokens = torch.full((len(ordered), width), ctx.policy.pad_id, dtype=torch.long)
        logprobs, mask = torch.zeros(len(ordered), width), torch.zeros(len(ordered), width)
        for r, b in enumerate(ordered):
            n = len(b.tokens)
            tokens[r, :n], logprobs[r, :n], mask[r, :n] = torch.tensor(b.tokens), torch.tensor(b.logprobs), 1
        device = ctx.policy.device
        truncated = torch.tensor([b.truncated for b in ordered], dtype=torch.bool)
        out = Generations(tokens.to(device), logprobs.to(device), mask.to(device), truncated.to(device))
        grown = [sum(b.group == g for b in ordered) for g in range(len(examples))]
        batch = decoded_batch(ctx, examples, grown, prompts, out)
        batch.note("generate", "tree leaf")
        return batch

    @staticmethod
    def top_up(ctx, examples, budget: Budget, batch: RolloutBatch, short: dict[int, int]) -> RolloutBatch:
        """Add ordinary samples to the groups still short of their size, keeping groups contiguous."""
        wanting = [g for g, n in short.items() if n > 0]
        extra = sample_groups(
            ctx,
            [examples[g] for g in wanting],
            Budget(
                prompts=len(wanting),
                group_size=budget.group_size,
                max_new_tokens=budget.max_new_tokens,
                group_sizes=tuple(short[g] for g in wanting),
                max_new_tokens_per_prompt=tuple(budget.limits(len(examples))[g] for g in wanting),
            ),
        )
        extra.note("generate", "topped up: an ordinary sample")
        parts, e = [], 0
        for g in range(batch.num_groups):
            parts.append(batch.select_groups([g]))
            if short[g] > 0:
                parts.append(extra.select_groups([e]))
                e += 1
        joined = RolloutBatch.concat(parts)
        sizes = [batch.group_sizes[g] + short[g] for g in range(batch.num_groups)]
        return joined.take_rows(list(range(joined.num_samples)), list(examples), sizes, list(batch.prompt_ids))

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
