"""Filters: dynamic sampling keeps groups by accuracy (DAPO eq. 11); overlong filtering keeps
truncated samples in the baseline and out of the loss."""

import torch

from tests.conftest import small_config
from workers.config import resolve
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.filter import FILTERS
from workers.reporting import MemoryReporter
from workers.tasks import Example, build_task
from workers.tasks.rewards import Completion, build_rewards
from workers.training.trainer import Trainer

MAX_NEW = 8


def scored_batch(cfg, groups):
    """A batch of arith groups; each sample is (text, length, truncated), scored by the config's rewards."""
    task = build_task(cfg)
    rewards = build_rewards(task, cfg)
    examples = [Example(f"{g}+1=", str(g + 1)) for g in range(len(groups))]
    samples = [(examples[g], *sample) for g, group in enumerate(groups) for sample in group]
    n = len(groups[0])
    mask = torch.zeros(len(samples), MAX_NEW)
    for row, (_, _, length, _) in enumerate(samples):
        mask[row, :length] = 1
    batch = RolloutBatch(
        examples=examples,
        group_sizes=[n] * len(groups),
        prompt_ids=[[1, 2] for _ in examples],
        tokens=torch.zeros(len(samples), MAX_NEW, dtype=torch.long),
        logprobs=torch.zeros(len(samples), MAX_NEW),
        mask=mask,
        truncated=torch.tensor([s[3] for s in samples]),
        texts=[s[1] for s in samples],
        born_step=1,
        notes=[{} for _ in samples],
    )
    completions = [Completion(text=s[1], length=s[2], truncated=s[3]) for s in samples]
    batch.rewards = torch.tensor(
        [sum(w * fn(e, c) for w, fn in rewards.values()) for (e, *_), c in zip(samples, completions)]
    )
    batch.correct = torch.tensor([task.is_correct(e, c.text) for (e, *_), c in zip(samples, completions)])
    return batch


def dapo(**filter_knobs):
    cfg = resolve({"method": "dapo", "rollout": {"max_new_tokens": MAX_NEW}, "filter": filter_knobs})
    return cfg, FILTERS.get(cfg.filter.name)(cfg)


# group 0 is all wrong, but its long completion is penalised as overlong, so its rewards differ;
# group 1 is half right
GROUPS = [
    [("7", 2, False), ("9", 2, False), ("12345678", 8, True), ("5", 2, False)],
    [("2", 2, False), ("3", 2, False), ("2", 2, False), ("0", 2, False)],
]


def test_dapo_drops_an_all_wrong_group_even_when_a_length_penalty_spreads_its_rewards():
    cfg, dynamic_sampling = dapo()
    batch = scored_batch(cfg, GROUPS)
    assert batch.group(batch.rewards)[0].unique().numel() > 1  # the overlong penalty moved one reward
    assert dynamic_sampling(batch, ctx=None) == [1]
    assert batch.notes[0]["filter"] == "dropped: all correct or all wrong"


def test_dynamic_sampling_on_rewards_keeps_that_group():
    cfg, by_reward = dapo(signal="reward")
    assert by_reward(scored_batch(cfg, GROUPS), ctx=None) == [0, 1]


def test_overlong_filtering_keeps_a_truncated_sample_in_the_baseline_but_out_of_the_loss():
    cfg, dynamic_sampling = dapo(signal="reward", overlong=True)
    batch = scored_batch(cfg, GROUPS)
    dynamic_sampling(batch, ctx=None)
    assert batch.in_loss.tolist() == [True, True, False, True] + [True] * 4
    assert "truncated: left out of the loss" in batch.notes[2]["filter"]
    _, without = dapo(signal="reward")
    unfiltered = scored_batch(cfg, GROUPS)
    without(unfiltered, ctx=None)
    assert unfiltered.in_loss.all()


def test_overlong_filtered_samples_carry_no_gradient():
    cfg = small_config(
        filter={"overlong": True},
        rollout={"prompts_per_step": 6, "max_new_tokens": 2},  # "7" + end fits, "12" + end does not
        advantage={"scale": "none"},
    )
    trainer = Trainer(cfg, MemoryReporter())
    batch = trainer.collector.collect(1, trainer.policy, trainer.backends.sampler, version=0).batch
    trainer.learner.compute_advantages(batch)
    truncated = batch.truncated.cpu()
    assert truncated.any() and not truncated.all()
    assert torch.equal(batch.in_loss, ~truncated)
    rewards = batch.group(batch.rewards)
    torch.testing.assert_close(  # the baseline is still the whole group's mean
        batch.advantages.view_as(rewards), rewards - rewards.mean(-1, keepdim=True)
    )

    def params_after_update(b):
        fresh = Trainer(cfg, MemoryReporter())
        fresh.learner.update(b)
        return [p.detach().clone() for p in fresh.policy.model.parameters()]

    altered = batch.select_groups(list(range(batch.num_groups)))
    for row in truncated.nonzero().flatten().tolist():
        altered.tokens[row] = torch.roll(altered.tokens[row], 1)
        altered.advantages[row] = 5.0
    for a, b in zip(params_after_update(batch), params_after_update(altered)):
        assert torch.equal(a, b)
