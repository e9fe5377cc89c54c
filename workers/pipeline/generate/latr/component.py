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

The decoding loop runs the policy itself with a KV cache, one row per live branch (TreeCache): a
new branch copies its sibling's row, since both share the prefix up to the split, and ended or
pruned branches leave it. Each token then costs one forward over the live branches' latest token,
not over their whole prefixes: without the cache a real model's step (64 branches of a 100-token
prompt and up to 64 tokens) recomputed about 7,000 positions per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workers import stopping
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.base import decoded_batch, sample_groups
from workers.pipeline.generate.latr import LATRKnobs
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.rollout import Generations
from workers.rollout.hf import DecodeState, HFBackend, restrict
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
        cache = TreeCache(ctx, prompts)
        for _ in range(max(limits)):
            stopping.checkpoint()  # a long generation obeys a cancel within the token
            live = [b for b in branches if not b.ended]
            if not live:
                break
            self.step(ctx, live, cache.next_token_logprobs(live), sizes, limits, branches, counts)
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

    def step(self, ctx, live, logp, sizes, limits, branches, counts) -> None:
        """One token for every live branch; new branches where the policy is uncertain; prune look-alikes.

        logp: (R, V) log pi(next token | branch) at the sampling temperature, for the R live branches."""
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


class TreeCache:
    """The policy's KV cache over a tree's live branches: one row per branch, all fed in lockstep.

    Every live branch has exactly one token the cache has not seen (its latest) when
    `next_token_logprobs` is called, except on the first call, which prefills the prompts. A
    branch split off since the last call has no row yet: it takes a copy of its sibling's, which
    holds the prefix both share (the split happens before either branch's new token is fed).
    The prefill and each token's forward are the hf sampler's (HFBackend.prefill, DecodeState).
    """

    def __init__(self, ctx, prompts: list[list[int]]):
        self.ctx, self.prompts = ctx, prompts
        self.rows: dict[int, int] = {}  # id(branch) -> its row in the cache, for the branches fed last call
        self.fed: list[Branch] = []  # those branches, held so that no new branch can reuse a pruned one's id
        self.state: DecodeState | None = None  # None until the first call

    def next_token_logprobs(self, live: list[Branch]) -> torch.Tensor:
        """(R, V) log pi(next token | branch) at the sampling temperature, R = len(live)."""
        with self.ctx.policy.computing():
            logits = self.prefill(live) if self.state is None else self.feed(live)
        self.fed, self.rows = live, {id(b): r for r, b in enumerate(live)}
        return torch.log_softmax(logits.float() / self.ctx.temperature, dim=-1)

    def prefill(self, live: list[Branch]) -> torch.Tensor:
        """The roots' prompts in one left-padded forward (a root has no token of its own yet)."""
        out, attention, positions = HFBackend(self.ctx.policy).prefill([self.prompts[b.group] for b in live])
        self.state = DecodeState(out.past_key_values, out.logits[:, -1], attention, positions[:, -1:] + 1, None)
        return self.state.logits

    def feed(self, live: list[Branch]) -> torch.Tensor:
        """Realign the cache to the live branches (new ones copy their sibling's row), then feed each its latest."""
        device = self.state.attention.device
        self.state.select(torch.tensor([self.row_of(b) for b in live], device=device))  # (R,) rows of the last call
        latest = torch.tensor([b.tokens[-1] for b in live], device=device)  # (R,)
        return self.state.feed(self.ctx.policy.model, latest).logits[:, -1]

    def row_of(self, b: Branch) -> int:
        if id(b) in self.rows:
            return self.rows[id(b)]
        # split off during the last step: its sibling was fed then, and a twin keeps its sibling for at least
        # lookahead + 1 >= 2 tokens, so the sibling is still known here
        return self.rows[id(b.sibling)]
