"""trace: the budget goes where predicted outcomes are most mixed (by hand and against every allocation), the
continuations share their prefixes, the predictor learns from prefixes and its state survives a save and load."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import torch

from tests.configs import small_config
from tests.offline.engine.test_environments import ScriptedTurns
from tests.offline.engine.test_treeps import (
    calculator_trainer,
    call_then_answer,
    generated_batches,
    warmed_calculator_run,
)
from workers.environments.episodes import EpisodeRecord, TurnRecord
from workers.errors import ConfigError
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate import GENERATORS
from workers.pipeline.generate.trace.component import PROMPT_LOGIT, allocate, mixed_gain
from workers.tasks import Example


def mixed(p: float, n: int) -> float:
    """P(the outcomes of n rollouts of success probability p are not all alike)."""
    return 1 - p**n - (1 - p) ** n


P, HELD, GROUPS = [0.5, 0.9, 0.3, 0.99, 0.6], [1, 1, 1, 1, 2], [0, 0, 1, 1, 2]


@pytest.mark.parametrize(("budget", "expected"), [
    (1, [1, 0, 0, 0, 0]),  # 2p(1-p) is largest at p = 0.5
    (2, [1, 0, 1, 0, 0]),  # then 0.3: 0.42 > 0.5's second (0.25) > 0.6 held twice (0.24) > 0.9 (0.18)
    (3, [2, 0, 1, 0, 0]),
    (4, [2, 0, 1, 0, 1]),
])  # fmt: skip
def test_the_budget_goes_where_p_times_1_minus_p_is_largest(budget, expected):
    assert allocate(P, HELD, GROUPS, budget) == expected


@pytest.mark.parametrize("budget", range(1, 7))
def test_the_greedy_allocation_is_the_best_of_every_allocation_and_spends_exactly_the_budget(budget):
    given = allocate(P, HELD, GROUPS, budget)
    assert sum(given) == budget
    value = lambda counts: sum(mixed(p, h + c) for p, h, c in zip(P, HELD, counts))  # noqa: E731
    best = max(value(c) for c in itertools.product(range(budget + 1), repeat=len(P)) if sum(c) == budget)
    assert value(given) == pytest.approx(best, abs=1e-12)


def test_equal_predictions_spread_the_budget_over_the_prompts():
    assert allocate([0.5] * 4, [1] * 4, [0, 0, 1, 1], 2) == [1, 0, 1, 0]
    assert mixed_gain(0.5, 1) == pytest.approx(2 * 0.5 * 0.5) and mixed_gain(0.5, 2) == pytest.approx(0.25)


def trace_component(**knobs):
    cfg = small_config(generate={"name": "trace", **knobs}, environment={"name": "calculator"})
    return GENERATORS.get("trace")(cfg)


def formed_or_not() -> RolloutBatch:
    """Six one-prompt episodes of two turns: those whose first turn was well formed succeeded, the others failed."""
    episodes, correct = [], []
    for row in range(6):
        formed = row % 2 == 0
        turns = [TurnRecord(0, 4, 8, 0.0, "", formed), TurnRecord(8, 10, 10, float(formed), "", True)]
        episodes.append(EpisodeRecord("", turns, solved=formed))
        correct.append(formed)
    batch = RolloutBatch(
        examples=[Example("q", "1")], group_sizes=[6], prompt_ids=[[1]], tokens=torch.zeros(6, 10, dtype=torch.long),
        logprobs=torch.zeros(6, 10), mask=torch.ones(6, 10), truncated=torch.zeros(6, dtype=torch.bool),
        texts=[""] * 6, born_step=0, correct=torch.tensor(correct), episodes=episodes,
    )  # fmt: skip
    batch.attached[PROMPT_LOGIT] = torch.zeros(6, dtype=torch.float64)
    return batch


def test_the_predictor_learns_which_prefixes_succeed_and_its_state_survives_a_save_and_a_load():
    component, batch = trace_component(), formed_or_not()
    x_formed = component.features(0.0, batch.episodes[0], 1)
    x_broken = component.features(0.0, batch.episodes[1], 1)
    assert component.predict(np.array([x_formed, x_broken])).tolist() == [0.5, 0.5]  # untrained
    for _ in range(10):
        component.observe(batch)
    formed, broken = component.predict(np.array([x_formed, x_broken]))
    assert formed > 0.6 and broken < 0.2  # both from 0.5: the format of the turns so far tells
    # each prefix after the first turn predicted right, the prompt (the same for all six, half of them right) half
    assert component.last["pipeline/generate/predictor_accuracy"] == (6 + 3) / 12
    again = trace_component()
    again.load_state_dict(component.state_dict())
    probe = np.array([x_formed, x_broken, component.features(0.5, None, 0)])
    assert np.array_equal(again.predict(probe), component.predict(probe)) and again.trained == 10
    thawed = pickle.loads(pickle.dumps(component))  # a resume checkpoint saves the components whole
    assert np.array_equal(thawed.predict(probe), component.predict(probe))


def test_rows_of_another_component_do_not_train_it():
    component, batch = trace_component(), formed_or_not()
    batch.attached[PROMPT_LOGIT][:] = float("nan")
    component.observe(batch)
    assert component.trained == 0 and not component.weights.any()


def test_a_step_continues_the_roots_prefixes_and_keeps_the_budget():
    trainer = calculator_trainer("trace")
    policy = trainer.policy
    batch = trainer.collector.collect(1, policy, ScriptedTurns(policy, call_then_answer), version=0).generated
    # 2 roots per prompt, the 4 left of the budget of 8: each to a prefix after a call (predicted p = 1/2 untrained:
    # 2p(1-p) = 0.5 for a prefix, more than 0.25 for a third episode of a prompt that has two)
    assert sum(batch.group_sizes) == 8 and batch.num_groups == 2
    shared = 0
    for g in range(2):
        rows = range(batch.offsets[g], batch.offsets[g + 1])
        by_node = {}
        for row in rows:
            call = batch.episodes[row].turns[0]
            by_node.setdefault(call.node, []).append(row)
        for held in by_node.values():
            first, *others = held
            end = batch.episodes[first].turns[0].observation_end
            for row in others:
                assert torch.equal(batch.tokens[row, :end], batch.tokens[first, :end])
                shared += 1
    assert shared == 4
    assert trainer.state.stages.generate.last["pipeline/generate/prefix_share"] == 1.0


def test_it_needs_an_environment_and_budget_left_to_allocate():
    with pytest.raises(ConfigError, match="environment.name: generate trace"):
        small_config(generate={"name": "trace"})
    with pytest.raises(ConfigError, match="generate.roots: 4 episodes per prompt use the whole budget"):
        small_config(generate={"name": "trace", "roots": 4}, environment={"name": "calculator"})


def test_the_tiny_models_rollouts_fill_the_budget_and_continuations_share_their_prefix():
    trainer = warmed_calculator_run("trace")
    batches = generated_batches(trainer)
    assert trainer.run() == "succeeded"
    for batch in batches:
        assert sum(batch.group_sizes) == 16 and min(batch.group_sizes) >= 2  # prompts x G, each at least its roots
        for g in range(batch.num_groups):
            first_holder = {}
            for row in range(batch.offsets[g], batch.offsets[g + 1]):
                for t in batch.episodes[row].turns:
                    first = first_holder.setdefault(t.node, row)
                    end = t.observation_end
                    assert torch.equal(batch.tokens[row, :end], batch.tokens[first, :end])
    predicted = [r["pipeline/generate/predictor_loss"] for r in trainer.reporter.metric_rows]
    assert len(predicted) == 3 and all(np.isfinite(predicted))
