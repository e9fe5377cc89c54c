"""gigpo: the episode-level and anchor-state step-level groups of a constructed set of episodes, by hand."""

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

EPS, GAMMA = 1e-4, 0.95


def turn(start, end, observation_end, reward, state):
    return TurnRecord(start, end, observation_end, reward, state, True)


def constructed_batch() -> RolloutBatch:
    """Group 0: three two-turn episodes; episodes 0 and 2 reach state "a" and solve it, episode 1 reaches "b" and
    fails. Group 1: two one-turn episodes that both fail. Turn 1 holds tokens 0-1, its observation token 2, turn 2
    tokens 3-4."""
    two_turns = lambda state, last: [turn(0, 2, 3, 0.0, state), turn(3, 5, 5, last, state)]  # noqa: E731
    episodes = [
        EpisodeRecord("", two_turns("a", 1.0), solved=True),
        EpisodeRecord("", two_turns("b", 0.0)),
        EpisodeRecord("", two_turns("a", 1.0), solved=True),
        EpisodeRecord("", [turn(0, 2, 2, 0.0, "c")]),
        EpisodeRecord("", [turn(0, 2, 2, 0.0, "c")]),
    ]
    mask = torch.tensor([[1.0] * 5] * 3 + [[1.0, 1.0, 0, 0, 0]] * 2)
    return RolloutBatch(
        examples=[Example("q0", "1"), Example("q1", "1")],
        group_sizes=[3, 2],
        prompt_ids=[[1], [1]],
        tokens=torch.zeros(5, 5, dtype=torch.long),
        logprobs=torch.zeros(5, 5),
        mask=mask,
        truncated=torch.zeros(5, dtype=torch.bool),
        texts=[""] * 5,
        born_step=0,
        rewards=torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0]),
        episodes=episodes,
        policy_tokens=mask.bool() & torch.tensor([True, True, False, True, True]),
    )


def standardized(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + EPS) for v in values]


def gigpo(**knobs):
    cfg = small_config(method="gigpo", advantage={"name": "gigpo", **knobs})
    return ADVANTAGES.get("gigpo")(cfg)


def test_the_episode_and_step_groups_are_the_hand_computed_ones():
    out = gigpo()(constructed_batch())
    episode = standardized([1.0, 0.0, 1.0])  # group 0; group 1's rewards are equal: 0
    # step group (group 0, start state): the first turns, returns gamma * 1, 0, gamma * 1
    first_turns = standardized([GAMMA, 0.0, GAMMA])
    # step group (group 0, "a"): the second turns of episodes 0 and 2, returns 1 and 1: 0; episode 1's second
    # turn is alone in "b": 0; group 1's first turns share the start state with equal returns: 0
    expected = torch.zeros(5, 5)
    for row in range(3):
        expected[row, 0:2] = episode[row] + first_turns[row]
        expected[row, 3:5] = episode[row] + 0.0
    assert torch.allclose(out.advantages, expected, atol=1e-6)
    assert out.advantages[:, 2].abs().sum() == 0  # the observation token
    assert out.in_loss.all()
    assert out.stats["pipeline/advantage/step_groups"] == 4.0  # (0, ""), (0, "a"), (0, "b"), (1, "")
    assert out.stats["pipeline/advantage/turns_in_shared_states"] == pytest.approx(7 / 8)


def test_the_step_weight_and_discount_act_where_the_paper_puts_them():
    batch = constructed_batch()
    episode_only = gigpo(step_weight=0.0)(batch).advantages
    undiscounted = gigpo(discount=1.0)(batch).advantages
    assert torch.allclose(episode_only[:3, 0:2], episode_only[:3, 3:5])  # every turn: the episode's advantage
    first_turns = standardized([1.0, 0.0, 1.0])  # gamma 1: the first turns' returns are the episodes' rewards
    episode = standardized([1.0, 0.0, 1.0])
    assert torch.allclose(undiscounted[:3, 0], torch.tensor(episode) + torch.tensor(first_turns), atol=1e-6)


def test_it_needs_an_environment():
    with pytest.raises(ConfigError, match="environment.name: advantage gigpo groups the turns of multi-turn episodes"):
        small_config(advantage={"name": "gigpo"})
