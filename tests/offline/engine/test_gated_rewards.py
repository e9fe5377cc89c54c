"""gated-rewards (G-RA): on constructed episodes, the immediate rewards count only where the outcome meets the
threshold, and every token's advantage is the gated return's group-relative one, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from tests.configs import small_config
from workers.environments.episodes import EpisodeRecord, TurnRecord
from workers.errors import ConfigError
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.batch import RolloutBatch
from workers.tasks import Example

EPS, FORMAT = 1e-4, 0.1  # the knobs' defaults; the threshold's is 1.0 (a solved calculator episode)


def turn(start, end, observation_end, reward=0.0, well_formed=True):
    return TurnRecord(start, end, observation_end, reward, "", well_formed)


def constructed_batch() -> RolloutBatch:
    """Group 0: episode 0 makes two calls (the second earns a reward part of 0.5) and is solved; episode 1 makes a
    call earning 0.5 and fails; episode 2 makes a malformed call and is solved. Group 1: two direct answers, one
    solved. A turn's tokens are followed by one observation token, the last turn's by none."""
    episodes = [
        EpisodeRecord("", [turn(0, 2, 3), turn(3, 5, 6, reward=0.5), turn(6, 8, 8, reward=1.0)], solved=True),
        EpisodeRecord("", [turn(0, 2, 3, reward=0.5), turn(3, 5, 5, reward=0.0)]),
        EpisodeRecord("", [turn(0, 2, 3, well_formed=False), turn(3, 5, 5, reward=1.0)], solved=True),
        EpisodeRecord("", [turn(0, 2, 2, reward=1.0)], solved=True),
        EpisodeRecord("", [turn(0, 2, 2, reward=0.0)]),
    ]
    lengths = [8, 5, 5, 2, 2]
    mask = torch.tensor([[1.0] * n + [0.0] * (8 - n) for n in lengths])
    observations = [{2, 5}, {2}, {2}, set(), set()]
    policy = torch.tensor([[bool(mask[r, t]) and t not in observations[r] for t in range(8)] for r in range(5)])
    return RolloutBatch(
        examples=[Example("q0", "1"), Example("q1", "1")],
        group_sizes=[3, 2],
        prompt_ids=[[1], [1]],
        tokens=torch.zeros(5, 8, dtype=torch.long),
        logprobs=torch.zeros(5, 8),
        mask=mask,
        truncated=torch.zeros(5, dtype=torch.bool),
        texts=[""] * 5,
        born_step=0,
        rewards=torch.tensor([sum(t.reward for t in e.turns) for e in episodes]),
        episodes=episodes,
        policy_tokens=policy,
    )


def standardized(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + EPS) for v in values]


def gated(**knobs):
    cfg = small_config(method="gated-rewards", advantage={"name": "gated-rewards", **knobs})
    return ADVANTAGES.get("gated-rewards")(cfg)


def test_only_episodes_whose_outcome_meets_the_threshold_add_their_immediate_rewards():
    returns, gate = gated().gated_returns(constructed_batch())
    # episode 0: outcome 1 (at the threshold) + two well-formed calls (2 x 0.1) + the part 0.5 of its second call;
    # episode 1: outcome 0, below: its call's format reward and part are not added; episode 2: outcome 1 + nothing
    # (its call was malformed); group 1: the answers are last turns, which earn no immediate reward
    assert gate.tolist() == [True, False, True, True, False]
    assert torch.allclose(returns, torch.tensor([1.0 + 2 * FORMAT + 0.5, 0.0, 1.0, 1.0, 0.0]))


def test_every_token_gets_the_gated_returns_group_relative_advantage_and_observations_none():
    batch = constructed_batch()
    out = gated()(batch)
    group0 = standardized([1.0 + 2 * FORMAT + 0.5, 0.0, 1.0])
    group1 = standardized([1.0, 0.0])
    expected = torch.zeros(5, 8)
    expected[0, [0, 1, 3, 4, 6, 7]] = group0[0]
    expected[1, [0, 1, 3, 4]] = group0[1]
    expected[2, [0, 1, 3, 4]] = group0[2]
    expected[3, :2], expected[4, :2] = group1[0], group1[1]
    assert torch.allclose(out.advantages, expected, atol=1e-6)
    assert out.advantages[~batch.policy_tokens].abs().sum() == 0  # observations and padding
    assert out.in_loss.all()
    assert out.stats["pipeline/advantage/gate_open"] == pytest.approx(3 / 5)
    assert out.stats["pipeline/advantage/immediate_reward"] == pytest.approx((2 * FORMAT + 0.5) / 5)


def test_a_threshold_below_every_outcome_accumulates_everything_and_the_weights_act_where_they_are_put():
    ungated, _ = gated(threshold=-1.0).gated_returns(constructed_batch())  # the paper's D-RA baseline
    assert torch.allclose(ungated, torch.tensor([1.0 + 2 * FORMAT + 0.5, FORMAT + 0.5, 1.0, 1.0, 0.0]))
    weighted, _ = gated(format_weight=0.3, part_weight=2.0).gated_returns(constructed_batch())
    assert torch.allclose(weighted, torch.tensor([1.0 + 2 * 0.3 + 2 * 0.5, 0.0, 1.0, 1.0, 0.0]))
    outcome_only = gated(format_weight=0.0, part_weight=0.0)(constructed_batch()).advantages
    assert torch.allclose(outcome_only[:3, 0], torch.tensor(standardized([1.0, 0.0, 1.0])), atol=1e-6)


def test_it_needs_an_environment():
    with pytest.raises(ConfigError, match="environment.name: advantage gated-rewards gates the immediate rewards"):
        small_config(advantage={"name": "gated-rewards"})
