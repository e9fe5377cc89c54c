"""Ragged groups: a batch whose groups differ in size flows through every stage as if each group were alone."""

import json

import pytest
import torch

from tests.conftest import small_config
from workers.config import resolve
from workers.models.policy import load_policy
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Budget, ControlStage
from workers.reporting import MemoryReporter
from workers.rollout import SamplingParams
from workers.rollout.hf import HFBackend
from workers.tasks import Example, build_task
from workers.training.trainer import Trainer


def scored(sizes, seed=0):
    """A batch of groups of the given sizes with random 0/1-ish rewards."""
    n = sum(sizes)
    gen = torch.Generator().manual_seed(seed)
    return RolloutBatch(
        examples=[Example(f"p{g}", "0") for g in range(len(sizes))],
        group_sizes=list(sizes),
        prompt_ids=[[1] for _ in sizes],
        tokens=torch.zeros(n, 3, dtype=torch.long),
        logprobs=torch.zeros(n, 3),
        mask=torch.ones(n, 3),
        truncated=torch.zeros(n, dtype=torch.bool),
        texts=[""] * n,
        born_step=1,
        rewards=torch.randint(0, 3, (n,), generator=gen).float() / 2,
        correct=torch.randint(0, 2, (n,), generator=gen).bool(),
        notes=[{} for _ in range(n)],
    )


ESTIMATORS = [
    ("group-mean", {"scale": "std"}),
    ("group-mean", {"scale": "none", "rescale_nonzero": True}),
    ("leave-one-out", {"scale": "none"}),
    ("group-median", {"scale": "mad", "eps": 1e-3, "rescale_nonzero": True}),
    ("group-median", {"scale": "std"}),
]


@pytest.mark.parametrize("name,knobs", ESTIMATORS)
def test_a_group_of_2_and_a_group_of_16_get_the_advantages_they_get_alone(name, knobs):
    cfg = resolve({"advantage": {"name": name, **knobs}})
    estimator = ADVANTAGES.get(name)(cfg)
    batch = scored([2, 16, 3, 2, 16])
    together = estimator(batch)
    for g in range(batch.num_groups):
        alone = estimator(batch.select_groups([g]))
        rows = batch.rows_of([g])
        torch.testing.assert_close(together.advantages[rows], alone.advantages, rtol=0, atol=0)
        assert torch.equal(together.in_loss[rows], alone.in_loss)


def test_group_views_of_a_ragged_batch():
    batch = scored([2, 16, 3])
    assert batch.offsets == [0, 2, 18, 21] and batch.group_index.tolist() == [0] * 2 + [1] * 16 + [2] * 3
    sums = batch.group_reduce(batch.rewards, "sum")
    assert sums.tolist() == [float(batch.rewards[a:b].sum()) for a, b in [(0, 2), (2, 18), (18, 21)]]
    sizes = {rows.shape for _, rows in batch.by_size()}
    assert sizes == {(1, 2), (1, 16), (1, 3)}
    with pytest.raises(ValueError, match="no common size"):
        batch.group(batch.rewards)
    joined = RolloutBatch.concat([batch.select_groups([1]), batch.select_groups([0, 2])])
    assert joined.group_sizes == [16, 2, 3] and joined.example_of(17).prompt == "p0"


@pytest.fixture(scope="module")
def policy():
    cfg = small_config(model={"warmup_steps": 0})
    return load_policy(cfg, build_task(cfg), torch.device("cpu"))


def test_the_backend_samples_each_prompt_its_own_count_up_to_its_own_limit(policy):
    prompts = [policy.encode_prompt(p) for p in ("1+2=", "12+7-3=", "9=")]
    out = HFBackend(policy).generate(
        prompts, [2, 5, 1], SamplingParams(6, 1.0), torch.Generator().manual_seed(0), limits=[6, 2, 4]
    )
    assert out.tokens.shape[0] == 8
    limits = torch.tensor([6] * 2 + [2] * 5 + [4])
    assert (out.lengths <= limits).all()
    assert out.truncated[2:7].all()  # random weights never stop within 2 tokens
    for row, prompt in enumerate([0, 0, 1, 1, 1, 1, 1, 2]):
        length = int(out.lengths[row])
        ids = torch.tensor([prompts[prompt] + out.tokens[row, :length].tolist()])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits[0, len(prompts[prompt]) - 1 : -1]
        expected = torch.log_softmax(logits, -1).gather(-1, out.tokens[row, :length, None])[:, 0]
        torch.testing.assert_close(out.logprobs[row, :length], expected, atol=1e-4, rtol=1e-4)


class HardPromptsGetMore(ControlStage):
    """A control stand-in: 16 rollouts for the first prompt of a round, 2 for the rest, 3 tokens for the last."""

    def __init__(self, fixed):
        self.fixed = fixed

    def plan(self, ctx):
        return self.fixed.plan(ctx)

    def select(self, ctx, candidates, count):
        return self.fixed.select(ctx, candidates, count)

    def allocate(self, ctx, examples, budget):
        sizes = (16,) + (2,) * (len(examples) - 1)
        limits = (budget.max_new_tokens,) * (len(examples) - 1) + (3,)
        return Budget(budget.prompts, budget.group_size, budget.max_new_tokens, sizes, limits)


@pytest.mark.parametrize("method", ["grpo", "mc-grpo", "dapo", "gspo"])
def test_a_control_stage_can_give_each_prompt_its_own_budget(method):
    cfg = small_config(method=method, schedule={"steps": 2}, rollout={"prompts_per_step": 3, "max_new_tokens": 5})
    trainer = Trainer(cfg, MemoryReporter())
    trainer.stages.control = HardPromptsGetMore(trainer.stages.control)
    assert trainer.run() == "succeeded"
    extra = 1 if method == "mc-grpo" else 0  # the pivot generator draws one more per group
    first = trainer.reporter.metric_rows[0]
    if method != "dapo":  # dynamic sampling may run several rounds
        assert first["counters/samples"] == 16 + 2 + 2 + 3 * extra
    assert all(r["policy/loss"] == r["policy/loss"] for r in trainer.reporter.metric_rows if "policy/loss" in r)


def test_the_prompt_history_counts_every_scored_group_and_is_checkpointed(tmp_path):
    history = PromptHistory()
    batch = scored([2, 4])
    batch.correct = torch.tensor([True, False, True, True, True, True])
    history.update(batch, step=1)
    history.update(batch.select_groups([1]), step=2)
    first, second = history.get(batch.examples[0]), history.get(batch.examples[1])
    assert (first.seen, first.samples, first.successes, first.last_pass_rate) == (1, 2, 1, 0.5)
    assert (second.seen, second.samples, second.last_step, second.alpha, second.beta) == (2, 8, 2, 9.0, 1.0)
    metrics = history.metrics()
    assert metrics["prompts/distinct"] == 2 and metrics["prompts/revisited"] == 1
    assert metrics["prompts/frac_solved"] == 0.5 and history.get(Example("never", "1")) is None

    trainer = Trainer(small_config(schedule={"steps": 2, "save_final": True}), MemoryReporter(), artifacts_dir=tmp_path)
    trainer.run()
    restored = PromptHistory()
    restored.load_state_dict(json.loads((tmp_path / "checkpoints" / "step-2" / "prompt_history.json").read_text()))
    assert restored.state_dict() == trainer.state.history.state_dict()
    seen = sum(len(stats["outcomes"]) for stats in restored.state_dict().values())
    assert seen == 8  # 2 steps x 4 prompts, a repeated prompt counted twice
    assert trainer.reporter.metric_rows[-1]["prompts/distinct"] == len(restored)
