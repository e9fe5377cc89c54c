"""LATR: groups grown as trees; branches at uncertain tokens, look ahead, prune the look-alikes."""

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_resumable import teacher_forced
from workers.config import resolve
from workers.models.policy import load_policy
from workers.pipeline.generate import GENERATORS
from workers.pipeline.generate.latr.component import Branch
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Budget, StageContext
from workers.reporting import MemoryReporter
from workers.rollout.hf import HFBackend
from workers.tasks import Example, build_task
from workers.training.trainer import Trainer


@pytest.fixture(scope="module")
def policy():
    cfg = small_config(model={"warmup_steps": 0})  # random weights: flat, uncertain next-token distributions
    return load_policy(cfg, build_task(cfg), torch.device("cpu"))


def run(policy, seed=0, group=4, limit=6, examples=(Example("1+2=", "3"), Example("7-5=", "2")), limits=(), **knobs):
    cfg = resolve({"method": "latr", "generate": knobs})
    latr = GENERATORS.get("latr")(cfg)
    ctx = StageContext(policy, HFBackend(policy), torch.Generator().manual_seed(seed), 1.0, 1.0, 0, 1, PromptHistory())
    budget = Budget(prompts=len(examples), group_size=group, max_new_tokens=limit, max_new_tokens_per_prompt=limits)
    return latr, latr(ctx, list(examples), budget)


def test_each_prompt_gets_exactly_g_rows_with_the_policys_logprobs(policy):
    latr, batch = run(policy, branch_threshold=0.02, similarity=1.0, lookahead=1)
    assert batch.group_sizes == [4, 4]
    assert latr.metrics()["pipeline/generate/branches"] > 0
    for row in range(batch.num_samples):
        n = int(batch.lengths[row])
        tokens = batch.tokens[row, :n].tolist()
        expected = teacher_forced(policy, batch.prompt_ids[int(batch.group_index[row])], tokens)
        assert torch.allclose(batch.logprobs[row, :n], expected, atol=1e-5)


def test_the_cached_tree_decodes_prompts_of_different_lengths_with_the_policys_logprobs(policy):
    """The KV cache's rows follow the branches: a branch copies its sibling's row at the split, ended and pruned
    branches leave, and the left padding differs per prompt; every kept token's log-probability is still what the
    policy gives it over its own prefix (teacher-forced without a cache)."""
    examples = (Example("1+2=", "3"), Example("17-5+4=", "16"), Example("9=", "9"))
    latr, batch = run(policy, group=6, limit=10, examples=examples, limits=(4, 10, 7), branch_threshold=0.02)
    assert batch.group_sizes == [6, 6, 6]
    assert latr.metrics()["pipeline/generate/branches"] > 0
    # the random policy never ends a row itself: each group's branches left the cache at their prompt's limit
    assert [sorted(set(batch.lengths[g * 6 : g * 6 + 6].tolist())) for g in range(3)] == [[4], [10], [7]]
    for row in range(batch.num_samples):
        n = int(batch.lengths[row])
        tokens = batch.tokens[row, :n].tolist()
        expected = teacher_forced(policy, batch.prompt_ids[int(batch.group_index[row])], tokens)
        assert torch.allclose(batch.logprobs[row, :n], expected, atol=1e-5)


def test_no_branching_where_the_policy_is_sure(policy):
    latr, batch = run(policy, branch_threshold=1.0)  # no other token ever has probability 1
    assert latr.metrics()["pipeline/generate/branches"] == 0
    # every group was one root and was topped up with ordinary samples
    assert latr.metrics()["pipeline/generate/topped_up"] == 6 and batch.group_sizes == [4, 4]


def test_a_branch_starts_with_another_token_than_its_sibling(policy):
    cfg = resolve({"method": "latr", "generate": {"branch_threshold": 0.02, "lookahead": 2}})
    latr = GENERATORS.get("latr")(cfg)
    pairs = []
    original = latr.step

    def step(ctx, live, logp, sizes, limits, branches, counts):
        original(ctx, live, logp, sizes, limits, branches, counts)
        pairs.extend((b.tokens[b.split_at], b.sibling.tokens[b.split_at]) for b in branches if b.sibling is not None)

    latr.step = step
    ctx = StageContext(policy, HFBackend(policy), torch.Generator().manual_seed(0), 1.0, 1.0, 0, 1, PromptHistory())
    latr(ctx, [Example("1+2=", "3"), Example("7-5=", "2")], Budget(prompts=2, group_size=4, max_new_tokens=6))
    assert latr.metrics()["pipeline/generate/branches"] > 0
    assert pairs and all(twin != sibling for twin, sibling in pairs)


def test_a_branch_that_stays_alike_is_pruned_and_one_that_diverges_is_kept():
    cfg = resolve({"method": "latr", "generate": {"lookahead": 3, "similarity": 0.6}})
    latr = GENERATORS.get("latr")(cfg)
    root = Branch(0, tokens=[5, 6, 7, 8, 9])
    alike = Branch(0, tokens=[5, 6, 1, 8, 9], sibling=root, split_at=2)  # 2 of the 3 lookahead tokens match
    apart = Branch(0, tokens=[5, 6, 1, 2, 3], sibling=root, split_at=2)
    assert latr.alike(alike) and not latr.alike(apart)


def test_latr_groups_are_more_diverse_than_independent_samples(policy):
    distinct = []
    for name in ("latr", "grpo"):
        cfg = small_config(
            method=name,
            generate={"branch_threshold": 0.05} if name == "latr" else {},
            rollout={"prompts_per_step": 16, "max_new_tokens": 6},
            schedule={"steps": 2},
        )
        reporter = MemoryReporter()
        Trainer(cfg, reporter).run()
        distinct.append(sum(r["groups/distinct_completions"] for r in reporter.metric_rows))
    assert distinct[0] > distinct[1]
