"""DARS: low-accuracy prompts get extra rollouts in further stages; groups grow ragged and stay contiguous."""

import math

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.control.dars.component import target_size
from workers.pipeline.history import PromptHistory
from workers.pipeline.stages import build_stages
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


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
    masses = {  # the sum of |A| over a group of n at this accuracy, and its value at accuracy 0.5
        "with-std": lambda n, a: 2 * n * math.sqrt(a * (1 - a)),  # GRPO's advantage, divided by the std
        "without-std": lambda n, a: 2 * n * a * (1 - a),  # r - mean (the authors' experiments)
    }
    for name, mass in masses.items():
        peak = mass(8, 0.5)
        for accuracy in (0.05, 0.1, 0.25, 0.4, 0.5):
            equal = target_size(accuracy, 8, "equal-treatment", name)
            weighted = target_size(accuracy, 8, "hardness-weighted", name)
            assert mass(equal, accuracy) == pytest.approx(peak)  # the mass of 8 samples at accuracy 0.5
            assert mass(weighted, accuracy) == pytest.approx(2 * (1 - accuracy) * peak)
            assert weighted >= equal - 1e-9
        # an all-wrong prompt is taken at accuracy 0.5 / G, as the authors' code does: a finite target
        assert target_size(0.0, 8, "equal-treatment", name) == target_size(0.5 / 8, 8, "equal-treatment", name)
    # the authors' closed forms without the std: ET N / (4 a (1 - a)), HW N / (2 a)
    assert target_size(0.25, 8, "equal-treatment", "without-std") == pytest.approx(8 / (4 * 0.25 * 0.75))
    assert target_size(0.25, 8, "hardness-weighted", "without-std") == pytest.approx(8 / (2 * 0.25))


def test_without_the_std_the_schedule_asks_what_the_authors_code_asks_and_not_the_std_forms_counts():
    # G = 4 at accuracies 0, 1/4, 2/4. The authors' equal-treatment without std: an all-wrong prompt at a = 1/8
    # targets 2 / (2 (1/8)(7/8)) = 9.14, so 6 more; 1/4 targets 2 / (2 (1/4)(3/4)) = 5.33, so 2 more.
    # The std form (this component's only one before) asked the cap for the all-wrong prompt and 1 for 1/4.
    batch = with_accuracies([0, 1, 2])
    assert dars(schedule="equal-treatment", mass="without-std").extend(Ctx(), batch, 1) == [6, 2, 0]
    assert dars(schedule="hardness-weighted", mass="without-std").extend(Ctx(), batch, 1) == [12, 4, 0]
    assert dars(schedule="equal-treatment", mass="with-std").extend(Ctx(), batch, 1) == [3, 1, 0]


def test_the_preset_drops_merged_groups_that_are_all_right_or_all_wrong():
    # after the extras are merged: an all-wrong group of 16 beside an informative group of 5 and an all-right
    # one of 4. Kept, the all-wrong group would shrink the step's update to 5/21 of its size (sequence-mean).
    merged = with_accuracies([0, 2, 4], size=4)
    merged = merged.add_to_groups([0, 1], with_grown_extras(merged, {0: (12, 0), 1: (1, 0)}))
    assert merged.group_sizes == [16, 5, 4]
    cfg = resolve({"method": "dars"})
    assert build_stages(cfg).filter(merged, Ctx()) == [1]
    assert merged.notes[0]["filter"].startswith("dropped") and merged.notes[16]["filter"] == "kept"
    assert build_stages(resolve({"control": {"name": "dars"}})).filter(merged, Ctx()) == [0, 1, 2]  # the old preset
    assert cfg.advantage.scale == "none" and cfg.control.mass == "without-std" and cfg.control.stages == 2


def with_grown_extras(batch: RolloutBatch, extras: dict[int, tuple[int, int]]) -> RolloutBatch:
    """Extra samples for some groups of `batch`: {group: (count, correct among them)}."""
    extra = scored([count for count, _ in extras.values()], seed=2)
    extra.correct = torch.tensor([i < right for count, right in extras.values() for i in range(count)])
    extra.rewards = extra.correct.float()
    extra.examples = [batch.examples[g] for g in extras]
    return extra


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
    equal = dars(schedule="equal-treatment", mass="with-std").extend(Ctx(), batch, 1)
    # all wrong, at 1/8: ceil(4 / (2 sqrt(7/64))) = 7 in all, 3 more; 1/4: ceil(4 / (2 sqrt(3/16))) = 5, 1 more
    assert equal == [3, 1, 0, 0]
    weighted = dars(schedule="hardness-weighted", mass="with-std")
    assert weighted.extend(Ctx(), batch, 1) == [7, 3, 0, 0]  # 1/8: ceil(4 sqrt(7)) = 11; 1/4: ceil(4 sqrt(3)) = 7
    assert weighted.metrics() == {"pipeline/control/extra_rollouts": 10.0, "pipeline/control/hard_prompts": 2.0}


def test_later_stages_reestimate_the_accuracy_from_the_grown_group():
    controller = dars(schedule="hardness-weighted", mass="with-std")
    batch = with_accuracies([1], size=7)  # 1/4 grew to 7 and the 3 extras were wrong: 1/7
    assert controller.extend(Ctx(), batch, 2) == [math.ceil(4 * math.sqrt(6)) - 7]
    assert controller.extend(Ctx(), with_accuracies([3], size=8), 2) == [0]  # 3/8: 4 sqrt(5/3) < 8


def test_extras_respect_the_per_prompt_cap_and_the_step_budget():
    batch = with_accuracies([0, 0, 1, 3])
    assert dars(max_extra=2).extend(Ctx(), batch, 1) == [2, 2, 2, 0]
    tight = dars(schedule="hardness-weighted", extra_budget=0.25)  # 4 extras a step, 28 asked
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
