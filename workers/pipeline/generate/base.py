"""The sampling helpers every generator shares (the components are the folders beside this module)."""

from __future__ import annotations

import torch

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import Budget, StageContext
from workers.rollout import Generations, SamplingParams
from workers.tasks import Example


def sample_groups(ctx: StageContext, examples: list[Example], budget: Budget, extra: int = 0) -> RolloutBatch:
    """The budget's samples per example (plus `extra` each) from the backend, decoded, one group per example:
    each prompt with its own group size and length limit (equal for all unless the control stage set them)."""
    prompt_ids = [ctx.policy.encode_prompt(e.prompt) for e in examples]
    sizes = [size + extra for size in budget.sizes(len(examples))]
    params = SamplingParams(budget.max_new_tokens, ctx.temperature, ctx.top_p, ctx.top_k)
    limits = budget.limits(len(examples))
    if ctx.environment is not None:  # each row an episode of turns with the environment
        return episode_groups(ctx, examples, sizes, prompt_ids, params, limits)
    if budget.stop is None:
        out = ctx.backend.generate(prompt_ids, sizes, params, ctx.generator, limits=limits)
    else:
        out = ctx.backend.generate(prompt_ids, sizes, params, ctx.generator, limits=limits, stop=budget.stop)
    batch = decoded_batch(ctx, examples, sizes, prompt_ids, out)
    return drop_aborted(batch, out.stopped.cpu()) if budget.stop is not None else batch


def episode_groups(ctx: StageContext, examples, sizes, prompt_ids, params, limits) -> RolloutBatch:
    """A RolloutBatch of multi-turn episodes: each row's completion is its turns and the observations between them,
    the observations kept out of the loss (policy_tokens); a turn is limited as a completion would be."""
    from workers.environments.episodes import Sampler, run_episodes

    sampler = Sampler(ctx.policy, ctx.backend, ctx.generator)
    episodes = run_episodes(sampler, ctx.environment, examples, prompt_ids, sizes, params, limits)
    return episode_batch(ctx, examples, sizes, prompt_ids, episodes)


def episode_batch(ctx: StageContext, examples, sizes, prompt_ids, episodes) -> RolloutBatch:
    """A RolloutBatch of `episodes` (rows group by group, sizes[g] of examples[g]): the observations out of the loss."""
    batch = decoded_batch(ctx, examples, sizes, prompt_ids, episodes.generations)
    batch.policy_tokens, batch.episodes = episodes.policy_tokens, episodes.records
    batch.decoded_tokens = float(episodes.decoded)  # the observations were written, not decoded
    return batch


def decoded_batch(
    ctx: StageContext, examples: list[Example], sizes: list[int], prompt_ids: list[list[int]], out: Generations
) -> RolloutBatch:
    """A RolloutBatch of the backend's generations, decoded, one group of `sizes[g]` rows per example."""
    texts = ctx.policy.decode_completions(out)
    return RolloutBatch(
        examples=list(examples),
        group_sizes=list(sizes),
        prompt_ids=prompt_ids,
        tokens=out.tokens,
        logprobs=out.logprobs,
        mask=out.mask,
        truncated=out.truncated,
        texts=texts,
        born_step=ctx.step,
        notes=[{} for _ in texts],
    )


def drop_aborted(batch: RolloutBatch, aborted: torch.Tensor) -> RolloutBatch:
    """The batch without the rows a stop rule aborted; each group's survivors carry weight n / survivors.

    An aborted row has no verdict (it never finished), so it leaves both the baseline and the loss;
    the survivors of a group of n stand in for all n, so the group keeps its share of the loss
    (importance reweighting). A stop rule must leave every group at least one row."""
    keep = (~aborted).tolist()
    rows, sizes, weights = [], [], []
    for g, size in enumerate(batch.group_sizes):
        survivors = [r for r in range(batch.offsets[g], batch.offsets[g + 1]) if keep[r]]
        rows += survivors
        sizes.append(len(survivors))
        weights += [size / len(survivors)] * len(survivors)
    out = batch.take_rows(rows, batch.examples, sizes, batch.prompt_ids)
    out.weights = torch.tensor(weights)
    for g, size in enumerate(batch.group_sizes):
        if sizes[g] < size:
            out.note("abort", f"{size - sizes[g]} of {size} aborted; survivors weighted {size / sizes[g]:.2f}", [g])
    out.decoded_tokens = float(batch.lengths.sum())  # the aborted rows' tokens were decoded too
    return out
