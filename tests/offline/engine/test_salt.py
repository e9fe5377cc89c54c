"""salt: the trajectory graph of a constructed set of episodes (its nodes, its edges and the episodes through each)
and every token's advantage, by hand."""

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

EPS = 1e-4
WIDTH = 11  # four turns of two tokens, an observation token after each but the last
OBSERVATION = 99  # the token id of every observation


def episode(steps: list[tuple[int, str]], reward: float) -> tuple[EpisodeRecord, list[int]]:
    """Turn k writes the word steps[k][0] twice (tokens 3k, 3k + 1) and leads to state steps[k][1]; its observation
    is token 3k + 2 (none after the last turn); only the last turn is rewarded. Returns the record and its tokens."""
    n, tokens, turns = len(steps), [], []
    for k, (word, state) in enumerate(steps):
        last = k == n - 1
        turns.append(TurnRecord(3 * k, 3 * k + 2, 3 * k + (2 if last else 3), reward if last else 0.0, state, True))
        tokens += [word, word] + ([] if last else [OBSERVATION])
    return EpisodeRecord("", turns), tokens


def constructed_batch() -> RolloutBatch:
    """Group 0: episodes 0-2 open with the same call (word 1, to state a); 0 then answers right (word 2), 1 retries a
    failing call twice (word 8, state unchanged) and answers wrong (3), 2 retries once and answers right; episode 3
    takes another way (4 to b, then 5). Group 1: three episodes that share no state but the start."""
    groups = [
        [
            episode([(1, "a"), (2, "a")], 1.0),
            episode([(1, "a"), (8, "a"), (8, "a"), (3, "a")], 0.0),
            episode([(1, "a"), (8, "a"), (2, "a")], 1.0),
            episode([(4, "b"), (5, "b")], 0.0),
        ],
        [episode([(6, "x")], 1.0), episode([(7, "y")], 0.0), episode([(9, "z"), (9, "w")], 0.0)],
    ]
    rows = [e for group in groups for e in group]
    tokens = torch.zeros(len(rows), WIDTH, dtype=torch.long)
    mask = torch.zeros(len(rows), WIDTH)
    for row, (_, ids) in enumerate(rows):
        tokens[row, : len(ids)] = torch.tensor(ids)
        mask[row, : len(ids)] = 1
    return RolloutBatch(
        examples=[Example("q0", "1"), Example("q1", "1")],
        group_sizes=[len(group) for group in groups],
        prompt_ids=[[1], [1]],
        tokens=tokens,
        logprobs=torch.zeros(len(rows), WIDTH),
        mask=mask,
        truncated=torch.zeros(len(rows), dtype=torch.bool),
        texts=[""] * len(rows),
        born_step=0,
        rewards=torch.tensor([record.reward for record, _ in rows]),
        episodes=[record for record, _ in rows],
        policy_tokens=mask.bool() & (tokens != OBSERVATION),
    )


def standardized(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + EPS) for v in values]


def salt(**knobs):
    cfg = small_config(method="salt", advantage={"name": "salt", **knobs})
    return ADVANTAGES.get("salt")(cfg)


def turn_values(values: dict[tuple[int, int], float]) -> torch.Tensor:
    expected = torch.zeros(7, WIDTH)
    for (row, k), value in values.items():
        expected[row, 3 * k : 3 * k + 2] = value
    return expected


def test_the_graph_is_the_hand_computed_one():
    graph = salt().graph(constructed_batch(), 0)
    assert graph.nodes == ["", "a", "b"]
    assert graph.edges == {  # (state before, the turn's tokens, state after): the episodes through it, each once
        ("", (1, 1), "a"): [0, 1, 2],
        ("a", (2, 2), "a"): [0, 2],
        ("a", (8, 8), "a"): [1, 2],  # episode 1 takes it twice
        ("a", (3, 3), "a"): [1],
        ("", (4, 4), "b"): [3],
        ("b", (5, 5), "b"): [3],
    }
    assert graph.turns[(1, 1)] == graph.turns[(1, 2)] == ("a", (8, 8), "a")
    by_states = salt(edge="states").graph(constructed_batch(), 0)
    assert by_states.edges == {("", (), "a"): [0, 1, 2], ("a", (), "a"): [0, 1, 2], ("", (), "b"): [3],
                               ("b", (), "b"): [3]}  # fmt: skip


def test_every_tokens_advantage_is_the_mean_over_the_episodes_through_its_edge():
    out = salt()(constructed_batch())
    a = standardized([1.0, 0.0, 1.0, 0.0])  # GRPO's: a[0] = a[2] = -a[1] = -a[3]
    grpo1 = standardized([1.0, 0.0, 0.0])
    expected = turn_values(
        {
            (0, 0): sum(a[:3]) / 3, (1, 0): sum(a[:3]) / 3, (2, 0): sum(a[:3]) / 3,  # the shared opening
            (0, 1): a[0], (2, 2): a[2],  # the right answer, taken by the two that succeed
            (1, 1): (a[1] + a[2]) / 2, (1, 2): (a[1] + a[2]) / 2, (2, 1): (a[1] + a[2]) / 2,  # the retry: 0
            (1, 3): a[1],  # the wrong answer, episode 1's alone
            (3, 0): a[3], (3, 1): a[3],
            (4, 0): grpo1[0], (5, 0): grpo1[1], (6, 0): grpo1[2], (6, 1): grpo1[2],
        }
    )  # fmt: skip
    assert torch.allclose(out.advantages, expected, atol=1e-5)
    assert out.advantages[0, 1].item() == pytest.approx(a[0] / 3, abs=1e-5)  # neutral: a third of a success
    assert out.advantages[1, 3].item() == pytest.approx(0.0, abs=1e-5)
    observations = constructed_batch().tokens == OBSERVATION
    assert out.advantages[observations].abs().sum() == 0
    assert out.in_loss.all()
    assert out.stats["pipeline/advantage/graph_edges"] == pytest.approx((6 + 4) / 2)
    shared = 3 + 2 + 3  # the turns of the opening, of the right answer and of the retry
    assert out.stats["pipeline/advantage/turns_on_shared_edges"] == pytest.approx(shared / 15)


def test_a_group_whose_episodes_share_no_state_past_the_start_gets_grpos_advantages():
    batch = constructed_batch()
    out = salt()(batch).advantages
    grpo = ADVANTAGES.get("group-mean")(small_config())(batch).advantages  # (N,)
    for row in (4, 5, 6):
        for turn in batch.episodes[row].turns:
            assert out[row, turn.start : turn.end].tolist() == pytest.approx([grpo[row].item()] * 2, abs=1e-6)


def test_edges_told_by_their_states_alone_merge_what_was_written():
    out = salt(edge="states")(constructed_batch()).advantages
    a = standardized([1.0, 0.0, 1.0, 0.0])
    # every turn of episodes 0-2 is on "" -> a or a -> a, both taken by all three: a third of a success each
    assert torch.allclose(out[:3][out[:3] != 0], torch.tensor(sum(a[:3]) / 3), atol=1e-5)
    assert out[3, 0].item() == pytest.approx(a[3], abs=1e-5)


def test_it_needs_an_environment():
    with pytest.raises(ConfigError, match="environment.name: advantage salt groups the turns of multi-turn episodes"):
        small_config(advantage={"name": "salt"})
