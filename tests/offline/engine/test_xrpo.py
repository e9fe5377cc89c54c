"""XRPO: extra rollouts to the most uncertain prompts; positive advantages sharpened for unlikely correct answers."""

import torch

from tests.conftest import small_config
from tests.offline.engine.test_dars import Ctx, with_accuracies
from tests.offline.engine.test_ragged import scored
from workers.config import resolve
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.control import CONTROLLERS
from workers.pipeline.control.xrpo.component import allocate_round, half_width
from workers.reporting import MemoryReporter
from workers.training.trainer import Trainer


def xrpo(**control):
    cfg = resolve({"method": "xrpo", "rollout": {"group_size": 4, "prompts_per_step": 4}, "control": control})
    controller = CONTROLLERS.get("xrpo")(cfg)
    controller.plan(Ctx())
    return controller


def test_the_interval_narrows_with_more_rollouts_and_the_first_ones_narrow_it_most():
    widths = [half_width(0.5, n, 0.95) for n in range(2, 12)]
    assert widths == sorted(widths, reverse=True)
    shrinks = [a - b for a, b in zip(widths, widths[1:])]
    assert shrinks == sorted(shrinks, reverse=True)
    assert half_width(0.0, 4, 0.95) == 0.0


def test_the_next_rollout_goes_to_the_most_uncertain_prompt():
    batch = with_accuracies([4, 2, 0])  # 4/4 (no spread), 2/4 (the most), 0/4
    assert xrpo(round_size=1).extend(Ctx(), batch, 1) == [0, 1, 0]
    assert xrpo(round_size=3, bonus=0.0).extend(Ctx(), with_accuracies([1, 4, 2]), 1) == [1, 0, 2]
    # many rollouts: the spread-out prompts take most, diminishing returns let the bonus reach the others
    stds, sizes = [0.0, 0.58, 0.5, 0.0], [4, 4, 4, 4]
    extras = allocate_round(stds, sizes, [0, 0, 0, 0], 40, 0.95, 0.05)
    assert extras[1] >= extras[2] > extras[0] > 0 and sum(extras) == 40


def test_the_bonus_favours_prompts_sampled_less_often_across_the_run():
    controller = xrpo(round_size=1)
    ctx, batch = Ctx(), with_accuracies([0, 0])
    seen_often = scored([50])
    seen_often.examples = [batch.examples[0]]
    ctx.history.update(seen_often, step=1)
    assert controller.extend(ctx, batch, 1) == [0, 1]


def test_extras_stop_at_the_step_budget():
    controller = xrpo(round_size=3, extra_budget=0.25)  # 4 extras a step: 3, then 1, then none
    batch = with_accuracies([2, 1, 3, 2])
    assert [sum(controller.extend(Ctx(), batch, stage)) for stage in (1, 2, 3)] == [3, 1, 0]
    assert controller.metrics()["pipeline/control/extra_rollouts"] == 4.0


def one_group(rewards, loglik_per_token, lengths):
    """A scored group whose sample i has rewards[i] and a per-token log-likelihood loglik_per_token[i]."""
    n, width = len(rewards), max(lengths)
    batch = scored([n])
    batch.rewards = torch.tensor(rewards, dtype=torch.float)
    batch.correct = batch.rewards > 0
    batch.mask = torch.tensor([[1.0] * length + [0.0] * (width - length) for length in lengths])
    batch.logprobs = torch.tensor(loglik_per_token)[:, None] * batch.mask
    batch.tokens = torch.zeros(n, width, dtype=torch.long)
    return batch


def test_sharpening_raises_only_correct_samples_less_likely_than_their_group():
    # per-token log-likelihoods: group mean -0.6; sample 1 is correct and 0.4 below it, sample 0 above
    batch = one_group([1, 1, 0, 0], [-0.2, -1.0, -0.6, -0.6], [3, 2, 4, 1])
    grpo = ADVANTAGES.get("group-mean")(resolve({}))(batch)
    out = ADVANTAGES.get("xrpo")(resolve({"advantage": {"name": "xrpo", "novelty": 1.0, "cap": 0.5}}))(batch)
    expected = grpo.advantages.clone()
    expected[1] *= 1 + 0.4
    torch.testing.assert_close(out.advantages, expected)
    assert torch.equal(torch.sign(out.advantages), torch.sign(grpo.advantages))
    assert out.stats["pipeline/advantage/sharpened"] == 0.25
    capped = ADVANTAGES.get("xrpo")(resolve({"advantage": {"name": "xrpo", "novelty": 5.0, "cap": 0.5}}))(batch)
    torch.testing.assert_close(capped.advantages[1], grpo.advantages[1] * 1.5)  # 1 + min(5 x 0.4, 0.5)


def test_sharpening_never_touches_wrong_samples_or_groups_without_a_signal():
    # the wrong samples are the unlikely ones here: their negative advantages stay GRPO's
    batch = one_group([1, 0, 0, 0], [-0.1, -2.0, -3.0, -0.1], [2, 2, 2, 2])
    grpo = ADVANTAGES.get("group-mean")(resolve({}))(batch)
    out = ADVANTAGES.get("xrpo")(resolve({"method": "xrpo"}))(batch)
    torch.testing.assert_close(out.advantages, grpo.advantages)
    solved = one_group([1, 1, 1, 1], [-0.1, -2.0, -3.0, -0.1], [2, 2, 2, 2])  # all right: A = 0, nothing to raise
    assert ADVANTAGES.get("xrpo")(resolve({"method": "xrpo"}))(solved).stats["pipeline/advantage/sharpened"] == 0.0


def test_xrpo_grows_ragged_groups_and_reports_both_parts_in_a_run():
    cfg = small_config(method="xrpo", schedule={"steps": 3})
    trainer = Trainer(cfg, MemoryReporter())
    observed = []
    observe = trainer.stages.control.observe
    trainer.stages.control.observe = lambda batch: observed.append(batch.group_sizes) or observe(batch)
    assert trainer.run() == "succeeded"
    rows = trainer.reporter.metric_rows
    assert any(max(sizes) > 4 for sizes in observed) and all(min(sizes) >= 4 for sizes in observed)
    for sizes, row in zip(observed, rows):
        assert sum(sizes) - 16 == row["pipeline/control/extra_rollouts"] <= 16  # budget: 1 x 4 prompts x 4
    assert all(0 <= row["pipeline/advantage/sharpened"] <= 1 for row in rows)
