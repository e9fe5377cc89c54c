"""Long episodes through the asynchronous mode: a step trains on the first groups to be over, the rest go on later.

APRIL's pool of episodes (workers/environments/pool.py) keeps more groups in flight than a step trains on and
stops after the turn at which the step's groups are over; a group still going is carried over at its turn boundary
and continued by a later step's policy, as old as the policy that began it. The tiny model writes the turns (real
weights, real backend); the environment here ends each episode after as many turns as its example says, whatever the
policy writes, so which episodes are long is known.
"""

from __future__ import annotations

import pytest
import torch

from tests.conftest import small_config
from tests.offline.engine.test_async_pipeline import RecordingTrainer
from workers import metrics as metric
from workers.environments.base import Turn
from workers.reporting import MemoryReporter, is_deterministic_metric
from workers.tasks import Example
from workers.training.trainer import Trainer


class CountedTurns:
    """An environment whose episode of an example lasts int(example.answer) turns, whatever the policy writes."""

    stop_strings = ()

    def __init__(self, max_turns: int = 6, max_episode_tokens: int = 512):
        self.max_turns, self.max_episode_tokens = max_turns, max_episode_tokens

    def reset(self, example, rng):
        return CountedEpisode(int(example.answer))


class CountedEpisode:
    opening, start_state = "", ""

    def __init__(self, turns: int):
        self.turns, self.taken = turns, 0

    def step(self, turn: str) -> Turn:
        self.taken += 1
        done = self.taken >= self.turns
        observation = "" if done else f" ok{self.taken} "
        return Turn(observation, float(done), done, str(self.taken), solved=done, action=turn)


def pooled_trainer(**sections) -> Trainer:
    cfg = small_config(method="april", model={"warmup_steps": 0}, eval={"every": 0},
                       rollout={"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 3}, **sections)  # fmt: skip
    return Trainer(cfg, MemoryReporter())


def with_counted_turns(trainer: Trainer) -> Trainer:
    trainer.collector.environment = CountedTurns()
    return trainer


class Questions:
    """The draw: examples whose episodes last the given numbers of turns, in this order."""

    def __init__(self, lengths: list[int]):
        self.lengths, self.drawn = iter(lengths), 0

    def __call__(self, count: int, budget):
        examples = []
        for _ in range(count):
            self.drawn += 1
            examples.append(Example(prompt=f"{self.drawn}+0=", answer=str(next(self.lengths))))
        return examples, budget


def generate_step(trainer: Trainer, step: int, questions: Questions):
    """Step `step`'s generate stage (APRIL's pool), sampled by the tiny policy at version step - 1."""
    ctx = trainer.collector.stage_context(step, trainer.policy, trainer.backends.sampler, step - 1)
    budget = trainer.state.stages.control.plan(ctx)
    ctx.draw = lambda count: questions(count, budget)
    examples, granted = ctx.draw(budget.prompts)
    april = trainer.state.stages.generate
    return april(ctx, examples, granted), april.metrics()


def test_a_step_ends_after_the_turn_its_groups_are_over_and_the_long_group_goes_on_later():
    trainer = with_counted_turns(pooled_trainer())
    # step 1 draws 2 groups and tops the pool up with 2 more (oversample 2): the second lasts 4 turns
    questions = Questions([1, 4, 1, 2, 1, 1, 3, 1, 1, 1, 1, 1])
    batch, seen = generate_step(trainer, 1, questions)
    assert [e.answer for e in batch.examples] == ["1", "1"]  # the two one-turn groups, in the pool's order
    assert seen["pipeline/generate/turn_calls"] == 1  # after one turn: nothing waited for the 4-turn episodes
    assert seen["pipeline/generate/carried_groups"] == 2  # the 4-turn group and the 2-turn one go on
    assert batch.versions.tolist() == [0, 0, 0, 0] and batch.notes[0]["generate"] == "sampled"
    pool = trainer.state.stages.generate.episode_pool
    long_group = next(g for g in pool.groups if g.example.answer == "4")
    first_turns = [list(row.tokens) for row in long_group.rows]
    assert all(len(row.record.turns) == 1 for row in long_group.rows)

    batch, seen = generate_step(trainer, 2, questions)
    # step 2: the 2-turn group is over after its second turn, with one of the new one-turn groups
    assert [e.answer for e in batch.examples] == ["2", "1"] and seen["pipeline/generate/turn_calls"] == 1
    assert seen["pipeline/generate/resumed_rows"] == 4  # the two carried groups went on from their turn
    assert batch.versions.tolist() == [0, 0, 1, 1]  # a carried group is as old as the policy that began it
    assert batch.notes[0]["generate"] == "begun at step 1, carried 1x"

    answers = []
    for step in range(3, 6):
        batch, seen = generate_step(trainer, step, questions)
        answers += [e.answer for e in batch.examples]
        for row, episode in enumerate(batch.episodes):
            assert len(episode.turns) == int(batch.example_of(row).answer) and episode.solved
            if batch.example_of(row).answer == "4":  # it went on from the very tokens it stopped at
                assert batch.versions[row] == 0 and batch.notes[row]["generate"] == "begun at step 1, carried 3x"
                stopped_at = first_turns[row % 2]
                assert batch.tokens[row, : len(stopped_at)].tolist() == stopped_at
                observed = ~batch.policy_tokens[row] & (batch.mask[row] > 0)
                assert int(observed.sum()) == 3 * len(" ok1 ")  # three observations, never the policy's
    assert "4" in answers and "3" in answers


def test_no_episode_begun_is_lost_or_trained_twice():
    trainer = with_counted_turns(pooled_trainer())
    lengths = [1 + (7 * i) % 5 for i in range(200)]  # 1 to 5 turns
    questions = Questions(lengths)
    returned: list[str] = []
    decoded, trained_tokens = 0, 0  # tokens the steps say they decoded; the policy tokens of the rows returned
    for step in range(1, 16):
        batch, seen = generate_step(trainer, step, questions)
        assert batch.num_groups == 2 and batch.group_sizes == [2, 2]
        assert batch.decoded_tokens == seen["pipeline/generate/decoded_tokens"]
        decoded += int(seen["pipeline/generate/decoded_tokens"])
        trained_tokens += int(batch.policy_tokens.sum())
        returned += [e.prompt for e in batch.examples]
        for row, episode in enumerate(batch.episodes):
            assert len(episode.turns) == int(batch.example_of(row).answer)  # played to its end, never cut
    pool = trainer.state.stages.generate.episode_pool
    in_pool = [g.example.prompt for g in pool.groups]
    # each token counted once, in the step that decoded it: the returned rows' and the pool's rows' policy tokens
    assert decoded == trained_tokens + sum(sum(row.policy) for g in pool.groups for row in g.rows or ())
    assert len(set(returned)) == len(returned)  # none trained twice
    every_one_drawn = [f"{i}+0=" for i in range(1, questions.drawn + 1)]
    assert sorted(returned + in_pool, key=lambda p: int(p.split("+")[0])) == every_one_drawn


@pytest.mark.parametrize(("limit", "lag"), [(1, None), (2, 1)])
def test_through_the_asynchronous_trainer_no_carried_episode_older_than_the_bound_trains(limit, lag):
    """The real pipeline: the rollout thread plays the pool while the learner trains; a carried group is dropped
    by the staleness bound once it is more than `limit` versions old, and is never trained on. A fresh batch is
    `lag` versions old (unset: the bound), so with the lag below the bound a group carried over once trains."""
    cfg = small_config(method="april", model={"warmup_steps": 0}, eval={"every": 0},
                       rollout={"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 3},
                       schedule={"steps": 6, "max_staleness": limit, "rollout_lag": lag})  # fmt: skip
    reporter = MemoryReporter()
    trainer = RecordingTrainer(cfg, reporter)
    trainer.collector.environment = CountedTurns(max_turns=6)
    trainer.task.train_batch = lambda count, rng: [  # episodes of 1 to 6 turns
        Example(prompt=f"{int(rng.integers(0, 99))}+0=", answer=str(int(rng.integers(1, 7)))) for _ in range(count)
    ]
    assert trainer.run() == "succeeded"
    rows = [{k: v for k, v in row.items() if is_deterministic_metric(k)} for row in reporter.metric_rows]
    assert sum(row["pipeline/generate/resumed_rows"] for row in rows) > 0  # episodes went on in later steps
    assert all(row["pipeline/generate/turn_calls"] < 6 for row in rows)  # no step waited for a 6-turn episode
    assert all(row[metric.ASYNC_STALENESS_MAX] <= limit for row in rows)
    trained = [s for step in trainer.trained_staleness for s in step]
    assert all(0 <= s <= limit for s in trained)
    if lag is None:  # a fresh batch is `limit` old: a group carried over is older, dropped whole
        assert any(row[metric.ASYNC_DROPPED_SAMPLES] > 0 for row in rows)
        assert max(trained) == limit
    else:  # a fresh batch is `lag` old: a group carried over once is `lag` + 1 and trains
        assert max(trained) == lag + 1 == limit
    assert all(row[metric.EPISODE_SUCCESS] == 1.0 for row in rows)  # every trained episode played to its end
    assert torch.isfinite(torch.tensor([row["loss/policy"] for row in rows if "loss/policy" in row])).all()
