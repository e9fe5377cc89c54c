"""hgpo: the nested groups of a constructed set of episodes at every level, and every token's aggregated advantage,
by hand."""

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
WIDTH = 8  # three turns of two tokens, an observation token after each but the last


def episode(states: list[str], last_reward: float) -> EpisodeRecord:
    """Turn k holds tokens 3k, 3k + 1 and leads to states[k]; its observation is token 3k + 2 (none after the last
    turn); only the last turn is rewarded."""
    n = len(states)
    turns = [
        TurnRecord(3 * k, 3 * k + 2, 3 * k + (2 if k == n - 1 else 3), last_reward if k == n - 1 else 0.0, s, True)
        for k, s in enumerate(states)
    ]
    return EpisodeRecord("", turns)


def batch_of(groups: list[list[EpisodeRecord]]) -> RolloutBatch:
    episodes = [e for group in groups for e in group]
    mask = torch.zeros(len(episodes), WIDTH)
    policy = torch.zeros(len(episodes), WIDTH, dtype=torch.bool)
    for row, record in enumerate(episodes):
        mask[row, : record.turns[-1].end] = 1
        for turn in record.turns:
            policy[row, turn.start : turn.end] = True
    return RolloutBatch(
        examples=[Example(f"q{g}", "1") for g in range(len(groups))],
        group_sizes=[len(group) for group in groups],
        prompt_ids=[[1]] * len(groups),
        tokens=torch.zeros(len(episodes), WIDTH, dtype=torch.long),
        logprobs=torch.zeros(len(episodes), WIDTH),
        mask=mask,
        truncated=torch.zeros(len(episodes), dtype=torch.bool),
        texts=[""] * len(episodes),
        born_step=0,
        rewards=torch.tensor([e.reward for e in episodes]),
        episodes=episodes,
        policy_tokens=policy,
    )


def constructed_batch() -> RolloutBatch:
    """Group 0: episodes 0 and 2 go "" -> a -> c, episode 1 reaches c by b, episode 3 stops at a (a -> d); episode 0
    and 3 succeed. Group 1: episode 4 visits p twice (p -> p -> q) and succeeds; episode 5 fails in one turn."""
    return batch_of(
        [
            [episode(["a", "c", "x"], 1.0), episode(["b", "c", "y"], 0.0), episode(["a", "c", "z"], 0.0),
             episode(["a", "d"], 1.0)],
            [episode(["p", "p", "q"], 1.0), episode(["r"], 0.0)],
        ]
    )  # fmt: skip


def standardized(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + EPS) for v in values]


def hgpo(**knobs):
    cfg = small_config(method="hgpo", advantage={"name": "hgpo", **knobs})
    return ADVANTAGES.get("hgpo")(cfg)


def test_the_groups_at_every_level_are_the_hand_computed_ones():
    levels = hgpo().hierarchy(constructed_batch())
    assert levels[0] == {  # the state each turn is taken from
        (0, ("",)): [(0, 0), (1, 0), (2, 0), (3, 0)],
        (0, ("a",)): [(0, 1), (2, 1), (3, 1)],
        (0, ("c",)): [(0, 2), (1, 2), (2, 2)],
        (0, ("b",)): [(1, 1)],
        (1, ("",)): [(4, 0), (5, 0)],
        (1, ("p",)): [(4, 1), (4, 2)],  # a state visited twice by one episode pools its two turns
    }
    assert levels[1] == {  # that state and the one before it: c reached by a, or by b, part
        (0, ("", "a")): [(0, 1), (2, 1), (3, 1)],
        (0, ("a", "c")): [(0, 2), (2, 2)],
        (0, ("", "b")): [(1, 1)],
        (0, ("b", "c")): [(1, 2)],
        (1, ("", "p")): [(4, 1)],
        (1, ("p", "p")): [(4, 2)],
    }
    assert levels[2] == {  # the whole history of three states: only third turns reach it
        (0, ("", "a", "c")): [(0, 2), (2, 2)],
        (0, ("", "b", "c")): [(1, 2)],
        (1, ("", "p", "p")): [(4, 2)],
    }
    assert len(levels) == 3
    assert len(hgpo(levels=0).hierarchy(constructed_batch())) == 1


def test_every_tokens_advantage_is_the_hand_computed_aggregation():
    out = hgpo()(constructed_batch())
    # discounted returns: episode 0 (0.9025, 0.95, 1), episode 3 (0.95, 1), episode 4 (0.9025, 0.95, 1), others 0
    first = standardized([GAMMA**2, 0.0, 0.0, GAMMA])  # level 0 only: a first turn has no history
    at_a = standardized([GAMMA, 0.0, 1.0])  # levels 0 and 1 hold the same turns: their weighted mean is the value
    at_c = standardized([1.0, 0.0, 0.0])  # level 0 of the third turns (weight 2)
    by_a = standardized([1.0, 0.0])  # levels 1 and 2 of episodes 0 and 2 (weights 3 and 4)
    turn = {
        (0, 0): first[0], (1, 0): first[1], (2, 0): first[2], (3, 0): first[3],
        (0, 1): at_a[0], (2, 1): at_a[1], (3, 1): at_a[2],
        (1, 1): 0.0,  # alone at every level: nothing to be relative to
        (0, 2): (2 * at_c[0] + 3 * by_a[0] + 4 * by_a[0]) / 9,
        (2, 2): (2 * at_c[2] + 3 * by_a[1] + 4 * by_a[1]) / 9,
        (1, 2): at_c[1],  # c by another way: a peer at level 0 only, so level 0 alone decides
        (4, 0): standardized([GAMMA**2, 0.0])[0], (5, 0): standardized([GAMMA**2, 0.0])[1],
        (4, 1): standardized([GAMMA, 1.0])[0], (4, 2): standardized([GAMMA, 1.0])[1],
    }  # fmt: skip
    expected = torch.zeros(6, WIDTH)
    for (row, k), value in turn.items():
        expected[row, 3 * k : 3 * k + 2] = value
    assert torch.allclose(out.advantages, expected, atol=1e-5)
    observations = torch.tensor([2, 5])
    assert out.advantages[:, observations].abs().sum() == 0
    assert out.in_loss.all()
    assert out.stats["pipeline/advantage/level0_turns_with_peers"] == pytest.approx(14 / 15)
    assert out.stats["pipeline/advantage/level1_turns_with_peers"] == pytest.approx(5 / 9)
    assert out.stats["pipeline/advantage/level2_turns_with_peers"] == pytest.approx(2 / 4)


def test_a_level_whose_returns_are_equal_says_nothing_and_leaves_the_weights_to_the_others():
    """Three episodes reach c, two of them by a and both succeed: at levels 1 and 2 the two are equal (A = 0), so
    their third turns take level 0's advantage alone, not (2 A_0 + 3·0 + 4·0) / 9."""
    batch = batch_of([[episode(["a", "c", "x"], 1.0), episode(["b", "c", "y"], 0.0), episode(["a", "c", "z"], 1.0)]])
    out = hgpo()(batch)
    at_c = standardized([1.0, 0.0, 1.0])
    assert out.advantages[0, 6:8].tolist() == pytest.approx([at_c[0]] * 2, abs=1e-5)
    assert out.advantages[2, 6:8].tolist() == pytest.approx([at_c[2]] * 2, abs=1e-5)


def test_the_weights_grow_with_the_history_a_level_shares_as_alpha_says():
    batch = constructed_batch()
    at_c, by_a = standardized([1.0, 0.0, 0.0])[0], standardized([1.0, 0.0])[0]
    alike = hgpo(weight_alpha=0.0)(batch).advantages
    assert alike[0, 6].item() == pytest.approx((at_c + 2 * by_a) / 3, abs=1e-5)
    squared = hgpo(weight_alpha=2.0)(batch).advantages
    assert squared[0, 6].item() == pytest.approx((4 * at_c + 9 * by_a + 16 * by_a) / 29, abs=1e-5)


def gigpo(step_weight: float):
    cfg = small_config(method="gigpo", advantage={"name": "gigpo", "step_weight": step_weight})
    return ADVANTAGES.get("gigpo")(cfg)


def test_level_0_alone_is_gigpos_step_advantage():
    batch = constructed_batch()
    state_only = hgpo(levels=0)(batch).advantages
    step = gigpo(1.0)(batch).advantages - gigpo(0.0)(batch).advantages  # A_step alone, without A_episode
    assert torch.allclose(state_only * batch.policy_tokens, step * batch.policy_tokens, atol=1e-5)


def test_the_episode_group_weighs_in_grpos_advantage_with_weight_1():
    batch = constructed_batch()
    episode_level = standardized([1.0, 0.0, 0.0, 1.0])
    out = hgpo(episode_group=True)(batch).advantages
    alone = hgpo()(batch).advantages
    # turn (1, 1), alone at every level, now gets its episode's advantage; (1, 2) the mean of it and level 0's
    assert out[1, 3].item() == pytest.approx(episode_level[1], abs=1e-5)
    assert out[1, 6].item() == pytest.approx((episode_level[1] + 2 * alone[1, 6].item()) / 3, abs=1e-5)


def test_it_needs_an_environment():
    with pytest.raises(ConfigError, match="environment.name: advantage hgpo groups the turns of multi-turn episodes"):
        small_config(advantage={"name": "hgpo"})
