"""`treeps`: each group a tree of episodes, M roots branched at turn boundaries into G leaves (TreePS-RAG).

TreePS-RAG (Zhang et al. 2026) models a multi-turn rollout as a path of a tree whose nodes are its turns: episodes
that share their first turns and then go different ways give each of those turns a Monte Carlo value, the mean
outcome of the episodes below it (the advantage stage's `treeps`). This generator builds the tree at the budget
of independent rollouts, G leaves per prompt:

1. `roots` episodes start from the prompt and play `branch_after` turns (workers/environments/episodes.Forest);
2. at each branching level (after turns branch_after .. branch_after + branch_levels - 1), every path still going
   is split into children, each a copy of its prefix and of its episode's state, that go on on their own; the
   leaves still to come (G minus the episodes already ended) are shared evenly over the paths: c children each
   with c^(levels left) <= its share at an early level, the whole rest at the last (the first ones one more);
3. the paths then play to their end. A group whose episodes all ended before its last branching level is topped
   up with fresh episodes from its prompt, so every tree holds exactly G leaves.

Each leaf is a row, its whole episode from the prompt; the rows below a node hold its tokens identically and its
node id (TurnRecord.node). The shared tokens were generated once: `decoded_tokens` counts them once.
"""

from __future__ import annotations

from workers.environments.episodes import Forest, Sampler
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.base import episode_batch
from workers.pipeline.generate.treeps import TreePSKnobs
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.rollout import SamplingParams
from workers.tasks import Example


def children_per_path(remaining: int, paths: int, levels_left: int) -> list[int]:
    """How many children each of `paths` live paths gets at a branching level, with `remaining` leaves still to
    come and `levels_left` levels after this one: all of them shared out at the last level (the first paths one
    more), else the largest c with paths * c^(levels_left + 1) <= remaining (at least 1: a path goes on)."""
    if levels_left == 0:
        share, extra = divmod(remaining, paths)
        return [share + (i < extra) for i in range(paths)]
    c = 1
    while paths * (c + 1) ** (levels_left + 1) <= remaining:
        c += 1
    return [c] * paths


class TreeRollouts(GenerateStage):
    """Each group a tree: M roots, branched after chosen turns, G leaves (TreePS-RAG's online tree construction).

    Knobs: generate.roots (M), branch_after, branch_levels; rollout.group_size (G, the leaves). Reports
    pipeline/generate/branched_paths (paths split this step), pipeline/generate/topped_up (fresh episodes of
    groups whose episodes all ended before branching) and pipeline/generate/shared_token_share (the share of the
    rows' policy tokens that another row of the tree also holds).
    """

    Knobs = TreePSKnobs

    def __init__(self, cfg):
        g = cfg.generate
        self.roots, self.levels = g.roots, list(range(g.branch_after, g.branch_after + g.branch_levels))
        self.last: dict[str, float] = {}

    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        sizes, limits = budget.sizes(len(examples)), budget.limits(len(examples))
        prompt_ids = [ctx.policy.encode_prompt(e.prompt) for e in examples]
        params = SamplingParams(budget.max_new_tokens, ctx.temperature, ctx.top_p, ctx.top_k)
        forest = Forest(Sampler(ctx.policy, ctx.backend, ctx.generator), ctx.environment, examples, prompt_ids,
                        params, limits)  # fmt: skip
        trees = [[forest.root(g) for _ in range(min(self.roots, size))] for g, size in enumerate(sizes)]
        counts = {"branched": 0, "topped_up": 0}
        for level, turn in enumerate(self.levels):
            forest.advance([r for tree in trees for r in tree], turns=turn)
            levels_left = len(self.levels) - 1 - level
            trees = [self.branch(forest, g, tree, sizes[g], levels_left, counts) for g, tree in enumerate(trees)]
        forest.advance([r for tree in trees for r in tree])
        episodes = forest.episodes([r for tree in trees for r in tree])
        batch = episode_batch(ctx, examples, sizes, prompt_ids, episodes)  # decoded_tokens: shared prefixes once
        batch.note("generate", f"a leaf of a tree of {self.roots} roots")
        policy = float(episodes.policy_tokens.sum())
        self.last = {
            "pipeline/generate/branched_paths": float(counts["branched"]),
            "pipeline/generate/topped_up": float(counts["topped_up"]),
            "pipeline/generate/shared_token_share": (policy - episodes.decoded) / max(policy, 1.0),
        }
        return batch

    @staticmethod
    def branch(forest: Forest, group: int, tree: list[int], size: int, levels_left: int, counts) -> list[int]:
        """The tree's rows after a branching level, each live path followed by its new children (the rows of a
        tree stay in depth-first order); at the last level a tree with no live path is topped up with roots."""
        live = [r for r in tree if not forest.done(r)]
        remaining = size - (len(tree) - len(live))
        if not live:
            if levels_left == 0 and remaining > 0:
                counts["topped_up"] += remaining
                return tree + [forest.root(group) for _ in range(remaining)]
            return tree
        children = dict(zip(live, children_per_path(remaining, len(live), levels_left)))
        out = []
        for r in tree:
            out.append(r)
            if children.get(r, 1) > 1:
                counts["branched"] += 1
                out += [forest.fork(r) for _ in range(children[r] - 1)]
        return out

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
