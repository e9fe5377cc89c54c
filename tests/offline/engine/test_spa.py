"""spa-rl: the progress estimator's loss and training, the turn rewards alpha * c + beta * g, the group-relative
turn advantages, and the estimator's state through a checkpoint, on constructed episodes, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from tests.configs import small_config
from workers.environments.episodes import EpisodeRecord, TurnRecord
from workers.errors import ConfigError
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.advantage.spa_rl.component import SHAPE_FEATURES, ProgressEstimator
from workers.pipeline.batch import RolloutBatch
from workers.tasks import Example
from workers.training import checkpoint

EPS, BUCKETS = 1e-4, 4


def turn(start, end, observation_end, reward=0.0, well_formed=True):
    return TurnRecord(start, end, observation_end, reward, "", well_formed)


def constructed_batch() -> RolloutBatch:
    """Group 0: episode 0 calls (tokens 5 6), reads one observation token (9) and answers right (7 8); episode 1
    makes a malformed call and answers wrong (2 2); episode 2 answers right at once. Group 1: episode 3 calls and
    answers wrong, episode 4 answers right at once."""
    call_then = lambda reward, ok=True: [turn(0, 2, 3, well_formed=ok), turn(3, 5, 5, reward)]  # noqa: E731
    episodes = [
        EpisodeRecord("", call_then(1.0), solved=True),
        EpisodeRecord("", call_then(0.0, ok=False)),
        EpisodeRecord("", [turn(0, 2, 2, 1.0)], solved=True),
        EpisodeRecord("", call_then(0.0)),
        EpisodeRecord("", [turn(0, 2, 2, 1.0)], solved=True),
    ]
    tokens = torch.tensor([[5, 6, 9, 7, 8], [5, 6, 9, 2, 2], [7, 8, 0, 0, 0], [5, 6, 9, 2, 2], [7, 8, 0, 0, 0]])
    mask = torch.tensor([[1.0] * 5, [1.0] * 5, [1.0, 1.0, 0, 0, 0], [1.0] * 5, [1.0, 1.0, 0, 0, 0]])
    return RolloutBatch(
        examples=[Example("q0", "1"), Example("q1", "1")],
        group_sizes=[3, 2],
        prompt_ids=[[1], [1]],
        tokens=tokens,
        logprobs=-0.5 * mask,
        mask=mask,
        truncated=torch.zeros(5, dtype=torch.bool),
        texts=[""] * 5,
        born_step=0,
        rewards=torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0]),
        episodes=episodes,
        policy_tokens=mask.bool() & torch.tensor([True, True, False, True, True]),
    )


def spa(**knobs):
    cfg = small_config(method="spa-rl", advantage={"name": "spa-rl", "token_buckets": BUCKETS, **knobs})
    return ADVANTAGES.get("spa-rl")(cfg)


def standardized(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + EPS) for v in values]


def test_the_estimators_loss_is_the_squared_error_of_the_summed_contributions_against_the_outcome():
    estimator = ProgressEstimator(3, lr=0.1)
    with torch.no_grad():
        estimator.weight.copy_(torch.tensor([1.0, -2.0, 0.5]))
        estimator.bias.fill_(0.25)
    features = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 2.0], [0.0, 0.0, 1.0]])  # turns: c = 1.25, -0.75, 0.75
    episode, outcomes = torch.tensor([0, 0, 1]), torch.tensor([1.0, 0.0])
    expected = ((1.25 - 0.75 - 1.0) ** 2 + (0.75 - 0.0) ** 2) / 2
    assert float(estimator.loss(features, episode, outcomes).detach()) == pytest.approx(expected)


def test_a_few_steps_drive_each_episodes_summed_contributions_toward_its_outcome():
    component = spa()
    batch = constructed_batch()
    _, features, episode = component.turn_features(batch)
    sums = lambda: torch.zeros(5).index_add(0, episode, component.estimator.contributions(features).detach())  # noqa: E731
    assert sums().abs().sum() == 0  # it starts at zero: every contribution 0
    before, after = component.estimator.fit(features, episode, batch.rewards, steps=60)
    assert before == pytest.approx(3 / 5)  # three of five outcomes are 1, every sum 0
    assert after < before / 10
    assert (sums() - batch.rewards).abs().max() < 0.3


def test_a_turns_reward_is_alpha_contribution_plus_beta_grounding_and_its_advantage_the_sum_from_it_on():
    component = spa(estimator_steps=0, contribution_weight=2.0, grounding_weight=0.5, discount=0.9)
    with torch.no_grad():  # c = 0.1 on every turn, 0.9 on the last: hand-computable contributions
        component.estimator.weight[component.column("last")] = 0.8
        component.estimator.bias.fill_(0.1)
    batch = constructed_batch()
    out = component(batch)
    reward = lambda c, grounded: 2.0 * c + 0.5 * grounded  # noqa: E731
    # group 0's turns: episode 0 (call, answer), episode 1 (malformed call, answer), episode 2 (answer)
    n = standardized([reward(0.1, 1), reward(0.9, 1), reward(0.1, 0), reward(0.9, 1), reward(0.9, 1)])
    m = standardized([reward(0.1, 1), reward(0.9, 1), reward(0.9, 1)])  # group 1: episode 3 (call, answer), 4
    expected = torch.zeros(5, 5)
    expected[0, 0:2], expected[0, 3:5] = n[0] + 0.9 * n[1], n[1]
    expected[1, 0:2], expected[1, 3:5] = n[2] + 0.9 * n[3], n[3]
    expected[2, 0:2] = n[4]
    expected[3, 0:2], expected[3, 3:5] = m[0] + 0.9 * m[1], m[1]
    expected[4, 0:2] = m[2]
    assert torch.allclose(out.advantages, expected, atol=1e-5)
    assert out.advantages[~batch.policy_tokens].abs().sum() == 0  # the observations (and padding)
    assert out.in_loss.all()
    assert out.stats["pipeline/advantage/contribution_before_last"] == pytest.approx(3 * 0.1 / 5)


def test_the_estimator_trains_on_the_batch_before_it_attributes():
    component, batch = spa(), constructed_batch()
    out = component(batch)
    assert out.stats["pipeline/advantage/estimator_loss"] < out.stats["pipeline/advantage/estimator_loss_before"]
    assert component.estimator.weight.abs().sum() > 0
    again = component(batch).stats  # a second batch starts from what the first taught it
    trained = out.stats["pipeline/advantage/estimator_loss"]
    assert again["pipeline/advantage/estimator_loss_before"] == pytest.approx(trained)


def test_the_estimators_state_round_trips_with_its_optimizer_moments():
    component, batch = spa(), constructed_batch()
    component(batch)
    restored = ProgressEstimator(BUCKETS + len(SHAPE_FEATURES), lr=0.05)
    restored.load_state_dict(component.estimator.state_dict())
    _, features, episode = component.turn_features(batch)
    for estimator in (component.estimator, restored):  # one more step each: Adam's moments came along
        estimator.fit(features, episode, batch.rewards, steps=1)
    assert torch.equal(restored.weight, component.estimator.weight)
    assert torch.equal(restored.bias, component.estimator.bias)


def test_a_component_thawed_from_a_checkpoint_attributes_bit_for_bit_as_the_one_that_went_on():
    cfg = small_config(method="spa-rl")
    component, batch = ADVANTAGES.get("spa-rl")(cfg), constructed_batch()
    component(batch)
    thawed = checkpoint.thaw_components(checkpoint.freeze_components(component, cfg), cfg)
    assert torch.equal(thawed(batch).advantages, component(batch).advantages)


def test_it_needs_an_environment():
    with pytest.raises(ConfigError, match="environment.name: advantage spa-rl attributes the outcome"):
        small_config(advantage={"name": "spa-rl"})
