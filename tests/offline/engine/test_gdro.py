"""GDRO: online difficulty classes; a prompt game over classes; a rollout game at a fixed mean group size."""

import numpy as np
import pytest

from tests.conftest import small_config
from tests.offline.engine.test_mopps import Ctx, visit
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.errors import ConfigError
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.control.budgeting import fixed_mean_sizes
from workers.pipeline.control.gdro.component import difficulty_class
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import Budget
from workers.reporting import MemoryReporter
from workers.tasks import Example
from workers.training.trainer import Trainer


def test_classes_follow_the_last_pass_rate_and_unseen_prompts_have_their_own():
    history = PromptHistory()
    rates = {"solved": 4, "easy": 3, "half": 2, "hard": 1, "never": 0}
    for name, right in rates.items():
        visit(history, Example(name, "1"), right, 4, step=1)
    got = {name: difficulty_class(history, Example(name, "1"), 4) for name in rates}
    assert got == {"solved": 0, "easy": 1, "half": 2, "hard": 3, "never": 3}
    assert difficulty_class(history, Example("new", "1"), 4) == 4


def test_fixed_mean_sizes_are_proportional_bounded_and_exact():
    sizes, price = fixed_mean_sizes(np.array([1.0, 1.0, 2.0, 4.0]), mean=4, low=2, high=16)
    assert sum(sizes) == 16 and all(2 <= s <= 16 for s in sizes)
    assert sizes[3] > sizes[2] > sizes[0] and price > 0
    sizes, _ = fixed_mean_sizes(np.array([1.0, 1000.0, 1.0]), mean=4, low=2, high=8)
    assert sizes == [2, 8, 2]  # the bounds hold and the mean is still exact


def grouped(examples, right):
    """A scored batch of one group of 4 per example, `right[i]` of them correct."""
    import torch

    batch = scored([4] * len(examples))
    batch.examples = list(examples)
    batch.correct = torch.tensor([k < r for r in right for k in range(4)])
    return batch


def test_the_rollout_budget_moves_to_the_hard_class_and_its_mean_stays_fixed():
    cfg = resolve({"method": "gdro", "control": {"prompt_game": False, "eta": 1.0}, "rollout": {"group_size": 4}})
    gdro = CONTROLLERS.get("gdro")(cfg)
    history = PromptHistory()
    hard = [Example(f"hard{i}", "1") for i in range(4)]
    easy = [Example(f"easy{i}", "1") for i in range(4)]
    mid = [Example(f"mid{i}", "1") for i in range(4)]
    for e in hard:
        visit(history, e, 0, 4, step=0)  # never right: class c3
    for e in easy:
        visit(history, e, 3, 4, step=0)  # class c1
    for e in mid:
        visit(history, e, 2, 4, step=0)  # class c2
    prompts = hard + easy + mid
    hard_sizes = []
    for step in range(1, 13):
        ctx = Ctx(history)
        ctx.step = step
        gdro.plan(ctx)
        chosen = gdro.select(ctx, prompts, len(prompts))
        budget = gdro.allocate(ctx, chosen, Budget(prompts=12, group_size=4, max_new_tokens=8))
        sizes = list(budget.group_sizes)
        assert sum(sizes) == 4 * len(prompts)  # the mean group size is exactly rollout.group_size
        assert all(2 <= s <= 16 for s in sizes)
        hard_sizes.append(np.mean(sizes[:4]))
        gdro.observe(grouped(chosen, [0] * 4 + [3] * 4 + [2] * 4))  # the hard class keeps failing
    assert hard_sizes == sorted(hard_sizes) and hard_sizes[0] == 4  # equal shares before anything is observed
    assert hard_sizes[-1] >= 6  # well over its equal share of the fixed budget
    weights = gdro.metrics()
    assert weights["pipeline/control/weight/c3"] > weights["pipeline/control/weight/c2"]
    assert weights["pipeline/control/weight/c3"] > weights["pipeline/control/weight/c1"]


def test_the_prompt_game_upweights_a_persistently_hard_class_but_not_a_frequent_one():
    cfg = resolve({"method": "gdro", "control": {"rollout_game": False, "explore": 0.0}})
    gdro = CONTROLLERS.get("gdro")(cfg)
    history = PromptHistory()
    hard = [Example(f"hard{i}", "1") for i in range(2)]
    frequent = [Example(f"mid{i}", "1") for i in range(30)]  # fifteen times as many candidates
    for e in hard:
        visit(history, e, 0, 4, step=0)
    for e in frequent:
        visit(history, e, 2, 4, step=0)
    shares = []
    for step in range(1, 31):
        ctx = Ctx(history)
        ctx.step = step
        gdro.plan(ctx)
        chosen = gdro.select(ctx, hard + frequent, 2)
        shares.append(sum(e in hard for e in chosen) / 2)
        # both classes observed every step: the hard one fails, the frequent one is half right
        gdro.observe(grouped(hard + frequent[:2], [0, 0, 2, 2]))
    # at first the classes are equally likely (not 2 of 32 candidates); soon the hard class dominates
    assert np.mean(shares[:3]) > 0.25
    assert np.mean(shares[-5:]) > 0.9


def test_group_size_outside_the_rollout_game_bounds_is_a_config_error():
    with pytest.raises(ConfigError, match="min_group"):
        resolve({"method": "gdro", "rollout": {"group_size": 4}, "control": {"min_group": 6}})


def test_a_gdro_run_trains_on_ragged_groups_at_the_planned_mean():
    cfg = small_config(method="gdro", schedule={"steps": 4})
    reporter = MemoryReporter()
    Trainer(cfg, reporter).run()
    rows = reporter.metric_rows
    assert all(r["pipeline/generate/samples_per_prompt"] == cfg.rollout.group_size for r in rows)
    assert all("pipeline/control/shadow_price" in r for r in rows)
    assert any(len([k for k in r if k.startswith("pipeline/control/group_size/")]) > 1 for r in rows[1:])
