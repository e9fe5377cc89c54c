"""DARS: low-accuracy prompts get extra rollouts in further stages; groups grow ragged and stay contiguous."""

import math

import pytest
import torch

from tests.conftest import small_config
from tests.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.control.dars import equal_treatment_size, hardness_weighted_size
from workers.pipeline.history import PromptHistory
from workers.reporting import MemoryReporter
from workers.trainer import Trainer


def wider(batch: RolloutBatch, width: int) -> RolloutBatch:
    """The batch with its completions right-padded to `width` tokens, as a later stage's longer samples are."""
    pad = width - batch.tokens.shape[1]
    batch.tokens = torch.nn.functional.pad(batch.tokens + 7, (0, pad))
    batch.logprobs = torch.nn.functional.pad(batch.logprobs - 0.5, (0, pad))
    batch.mask = torch.nn.functional.pad(batch.mask, (0, pad))
    return batch


def test_extra_samples_join_their_groups_contiguously():
    batch = scored([4, 4, 4])
    extra = wider(scored([3, 5], seed=1), 5)
    extra.examples = [batch.examples[2], batch.examples[0]]
    extra.notes = [{"control": "rollout stage 2"} for _ in range(8)]
    grown = batch.add_to_groups([2, 0], extra)
    assert grown.group_sizes == [9, 4, 7] and grown.examples == batch.examples
    assert grown.offsets == [0, 9, 13, 20] and grown.tokens.shape == (20, 5)
    # group g holds its own rows first, then its extras: rows offsets[g] .. offsets[g+1]-1
    expected = [*range(0, 4), *range(12 + 3, 12 + 8), *range(4, 8), *range(8, 12), *range(12, 12 + 3)]
    everything = RolloutBatch.concat([batch, extra])
    assert torch.equal(grown.rewards, everything.rewards[expected])
    assert torch.equal(grown.tokens, everything.tokens[expected]) and torch.equal(grown.mask, everything.mask[expected])
    assert [n.get("control") for n in grown.notes[:9]] == [None] * 4 + ["rollout stage 2"] * 5
    with pytest.raises(ValueError, match="prompt of the group"):
        batch.add_to_groups([1, 0], extra)


def test_a_grown_group_gets_the_advantages_it_would_get_sampled_at_once():
    batch = scored([4, 4, 4])
    extra = scored([3, 5], seed=1)
    extra.examples = [batch.examples[2], batch.examples[0]]
    grown = batch.add_to_groups([2, 0], extra)
    estimator = ADVANTAGES.get("group-mean")(resolve({}))
    together = estimator(grown).advantages
    for g in range(grown.num_groups):
        rewards = grown.rewards[grown.offsets[g] : grown.offsets[g + 1]]
        alone = scored([len(rewards)])
        alone.rewards = rewards.clone()
        torch.testing.assert_close(together[grown.offsets[g] : grown.offsets[g + 1]], estimator(alone).advantages)
        by_hand = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
        torch.testing.assert_close(together[grown.offsets[g] : grown.offsets[g + 1]], by_hand)


def test_the_schedules_match_the_cumulative_advantage_they_aim_at():
    def mass(n, accuracy):  # GRPO's sum of |A| over a group of n at this accuracy
        return 2 * n * math.sqrt(accuracy * (1 - accuracy))

    for accuracy in (0.05, 0.1, 0.25, 0.4, 0.5):
        assert mass(equal_treatment_size(accuracy, 8), accuracy) == pytest.approx(8)  # 8 samples at accuracy 0.5
        assert mass(hardness_weighted_size(accuracy, 8), accuracy) == pytest.approx(2 * (1 - accuracy) * 8)
        assert hardness_weighted_size(accuracy, 8) >= equal_treatment_size(accuracy, 8) - 1e-9
    assert equal_treatment_size(0.0, 8) == math.inf


class Ctx:
    def __init__(self, step=1):
        self.history, self.step = PromptHistory(), step


def with_accuracies(rights, size=4):
    """One group of `size` per entry, `right` of them correct (reward = correct)."""
    batch = scored([size] * len(rights))
    batch.correct = torch.tensor([i < right for right in rights for i in range(size)])
    batch.rewards = batch.correct.float()
    return batch


def dars(**control):
    cfg = resolve({"method": "dars", "rollout": {"group_size": 4, "prompts_per_step": 4}, "control": control})
    controller = CONTROLLERS.get("dars")(cfg)
    controller.plan(Ctx())
    return controller


def test_only_low_accuracy_prompts_get_extras_and_harder_ones_more():
    batch = with_accuracies([0, 1, 2, 4])  # accuracy 0, 0.25, 0.5, 1
    equal = dars(schedule="equal-treatment").extend(Ctx(), batch, 1)
    # all wrong: up to the cap of 4 + 12; 1/4: ceil(4 / (2 sqrt(3/16))) = 5 in all, 1 more; 0.5 and 1: none
    assert equal == [12, 1, 0, 0]
    weighted = dars(schedule="hardness-weighted")
    assert weighted.extend(Ctx(), batch, 1) == [12, 3, 0, 0]  # 1/4: ceil(4 sqrt(3)) = 7 in all
    assert weighted.metrics() == {"pipeline/control/extra_rollouts": 15.0, "pipeline/control/hard_prompts": 2.0}


def test_later_stages_reestimate_the_accuracy_from_the_grown_group():
    controller = dars(schedule="hardness-weighted")
    batch = with_accuracies([1], size=7)  # 1/4 grew to 7 and the 3 extras were wrong: 1/7
    assert controller.extend(Ctx(), batch, 2) == [math.ceil(4 * math.sqrt(6)) - 7]
    assert controller.extend(Ctx(), with_accuracies([3], size=8), 2) == [0]  # 3/8: 4 sqrt(5/3) < 8


def test_extras_respect_the_per_prompt_cap_and_the_step_budget():
    batch = with_accuracies([0, 0, 1, 3])
    assert dars(max_extra=2).extend(Ctx(), batch, 1) == [2, 2, 1, 0]
    tight = dars(schedule="hardness-weighted", extra_budget=0.25)  # 4 extras a step, 27 asked
    first = tight.extend(Ctx(), batch, 1)
    assert sum(first) == 4 and first[0] >= first[2] and first[1] >= first[2] and first[3] == 0
    assert tight.extend(Ctx(), with_accuracies([0, 0, 1, 3]), 2) == [0, 0, 0, 0]  # the step's budget is spent
    tight.plan(Ctx(step=2))
    assert sum(tight.extend(Ctx(step=2), batch, 1)) == 4  # a new step, a new budget


def test_presets_that_do_not_extend_never_ask_the_hook(monkeypatch):
    cfg = small_config(schedule={"steps": 2})
    trainer = Trainer(cfg, MemoryReporter())

    def never(*args):
        raise AssertionError("extend asked of a control stage with one rollout stage")

    monkeypatch.setattr(trainer.stages.control, "extend", never)
    assert trainer.run() == "succeeded"
    assert all(r["pipeline/generate/samples_per_prompt"] == 4 for r in trainer.reporter.metric_rows)


def test_dars_grows_the_groups_of_hard_prompts_in_a_run():
    cfg = small_config(method="dars", schedule={"steps": 3})
    trainer = Trainer(cfg, MemoryReporter())
    observed = []
    observe = trainer.stages.control.observe
    trainer.stages.control.observe = lambda batch: observed.append(batch) or observe(batch)
    assert trainer.run() == "succeeded"
    rows = trainer.reporter.metric_rows
    for batch, row in zip(observed, rows):
        assert all(4 <= size <= 4 + 12 for size in batch.group_sizes)
        assert sum(batch.group_sizes) - 16 == row["pipeline/control/extra_rollouts"] <= 16  # budget: 1 x 4 x 4
    samples = [row["counters/samples"] for row in rows]
    assert [now - before for before, now in zip([0, *samples], samples)] == [sum(b.group_sizes) for b in observed]
    assert any(max(batch.group_sizes) > 4 for batch in observed)  # ragged groups, larger than group_size
    stages = {note.get("control") for batch in observed for note in batch.notes}
    assert "rollout stage 2" in stages and "rollout stage 1" in stages
    assert any(row["pipeline/control/hard_prompts"] > 0 for row in rows)
