"""DUET: a posterior surrogate sets group sizes at a fixed total; a marker-gated rule aborts long rollouts."""

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_mopps import Ctx, visit
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.errors import ConfigError
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.generate.base import drop_aborted
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Budget
from workers.reporting import MemoryReporter
from workers.rollout import Partial
from workers.tasks import Example
from workers.training.trainer import Trainer


class Tokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


class Policy:
    tokenizer = Tokenizer()


def test_the_surrogate_gives_uncertain_prompts_more_rollouts_at_a_fixed_total():
    cfg = resolve({"method": "duet", "rollout": {"group_size": 4}})
    duet = CONTROLLERS.get("duet")(cfg)
    history = PromptHistory()
    split, solved, hopeless, new = (Example(p, "1") for p in ("split", "solved", "hopeless", "new"))
    for step in range(3):
        visit(history, split, 4, 8, step)
        visit(history, solved, 8, 8, step)
        visit(history, hopeless, 0, 8, step)
    ctx = Ctx(history)
    ctx.policy = Policy()
    budget = duet.allocate(ctx, [split, solved, hopeless, new], Budget(prompts=4, group_size=4, max_new_tokens=8))
    sizes = list(budget.group_sizes)
    assert sum(sizes) == 16 and all(2 <= s <= 16 for s in sizes)
    assert sizes[0] > sizes[1] and sizes[0] > sizes[2] and sizes[3] > sizes[1]
    assert budget.stop is not None


def partial(tokens, finished):
    tokens = torch.tensor(tokens)
    return Partial(tokens, torch.zeros(tokens.shape, dtype=torch.float), torch.tensor(finished), None)


def test_the_abort_rule_is_gated_by_the_marker_and_keeps_survivors():
    cfg = resolve({"method": "duet", "control": {"marker": "=", "abort_after": 0.5, "min_survivors": 1}})
    duet = CONTROLLERS.get("duet")(cfg)
    ctx = Ctx(PromptHistory())
    ctx.policy = Policy()
    duet.plan(ctx)
    abort = duet.abort_rule(ctx, sizes=[3, 2], limits=[8, 8])
    eq, x = ord("="), ord("x")
    # 3 tokens: under half the limit (4), nothing is aborted
    assert not abort(partial([[x] * 3, [x] * 3, [x] * 3, [x] * 3, [x] * 3], [False] * 5)).any()
    rows = [[x, x, x, x], [x, eq, x, x], [x, x, x, x], [x, x, x, x], [x, x, x, x]]
    cut = abort(partial(rows, [False, False, True, False, False])).tolist()
    # group 0: row 0 has no marker and is aborted, row 1 wrote "=", row 2 had finished;
    # group 1: both are due, but one must survive
    assert cut == [True, False, False, True, False]
    assert duet.metrics()["pipeline/control/aborted"] == 2


def test_aborted_rows_leave_their_group_and_survivors_are_reweighted():
    batch = scored([4, 2])
    batch.rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    out = drop_aborted(batch, torch.tensor([True, False, False, False, False, True]))
    assert out.group_sizes == [3, 1]
    assert out.weights.tolist() == pytest.approx([4 / 3] * 3 + [2.0])
    assert out.rewards.tolist() == [0.0, 1.0, 0.0, 1.0]


def test_group_size_outside_the_bounds_is_a_config_error():
    with pytest.raises(ConfigError, match="min_group"):
        resolve({"method": "duet", "rollout": {"group_size": 4}, "control": {"min_group": 6}})


def test_a_duet_run_aborts_long_rollouts_and_weights_the_survivors():
    cfg = small_config(
        method="duet",
        model={"warmup_steps": 0},  # an untrained policy: rollouts run long
        rollout={"max_new_tokens": 8},
        control={"abort_after": 0.25},
        schedule={"steps": 3},
    )
    reporter = MemoryReporter()
    trainer = Trainer(cfg, reporter)
    weights = []
    original = trainer.learner.compute_advantages

    def compute(batch):
        weights.append(batch.weights.clone())
        return original(batch)

    trainer.learner.compute_advantages = compute
    trainer.run()
    rows = reporter.metric_rows
    assert sum(r["pipeline/control/aborted"] for r in rows) > 0
    assert any(float(w.max()) > 1 for w in weights)
    # the aborted rows left their groups: fewer samples per prompt than the fixed mean of 4
    assert any(r["pipeline/generate/samples_per_prompt"] < cfg.rollout.group_size for r in rows)
