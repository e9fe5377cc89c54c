"""Rollout trees: episodes forked at turn boundaries (workers/environments/episodes.Forest), the treeps generator that
grows each group into G leaves, and the treeps advantage's Monte Carlo values, on constructed trees by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.configs import small_config
from tests.offline.engine.test_environments import ScriptedTurns, calculator
from workers.environments.calculator.component import evaluate
from workers.environments.episodes import EpisodeRecord, Forest, Sampler, TurnRecord, forked
from workers.errors import ConfigError
from workers.pipeline.advantage import ADVANTAGES
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.treeps.component import children_per_path
from workers.reporting import MemoryReporter
from workers.rollout import SamplingParams
from workers.tasks import Example
from workers.training.trainer import Trainer

EPS = 1e-4

# ---------------------------------------------------------------- forking an episode


def test_a_forked_episode_steps_on_its_own_and_shares_what_the_environment_holds():
    environment = calculator()
    example = Example(prompt="12*7+5=", answer="89")
    episode = environment.reset(example, np.random.default_rng(0))
    episode.step("<calc>12*7</calc>")
    copy = forked(episode, environment, example)
    assert copy.step("<calc>84+6</calc>").state == "84|90"
    assert episode.step("<calc>84+5</calc>").state == "84|89"  # the original goes its own way
    assert (episode.results, copy.results) == (["84", "89"], ["84", "90"])
    assert copy.environment is environment and copy.example is example
    assert copy.environment.task is environment.task


class Corpus:
    """What an environment holds and its episodes read: never copied with an episode."""

    def __init__(self):
        self.pages = {"a": "alpha", "b": "beta"}


class Lookups:
    stop_strings, max_turns, max_episode_tokens = (), 3, 64

    def __init__(self):
        self.corpus = Corpus()

    def reset(self, example, rng):
        return LookupEpisode(self)


class LookupEpisode:
    """An episode written by another author, with no method for forking: a reference to what its environment
    holds, and a state of its own."""

    start_state = ""

    def __init__(self, environment):
        self.corpus, self.read = environment.corpus, []

    def step(self, turn):
        self.read.append(self.corpus.pages.get(turn, "?"))
        return None


def test_any_episode_forks_without_a_method_of_its_own():
    environment = Lookups()
    episode = environment.reset(Example("?", "1"), np.random.default_rng(0))
    episode.step("a")
    copy = forked(episode, environment, Example("?", "1"))
    copy.step("b")
    assert (episode.read, copy.read) == (["alpha"], ["alpha", "beta"])
    assert copy.corpus is environment.corpus  # what the environment holds is shared, not copied


# ---------------------------------------------------------------- a forest of rows


def calculator_trainer(method="treeps", **sections):
    cfg = small_config(method=method, environment={"name": "calculator", "max_turns": 3}, model={"warmup_steps": 0},
                       rollout={"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 16}, **sections)  # fmt: skip
    return Trainer(cfg, MemoryReporter())


def call_then_answer(question, row, turn):
    """Turn 1: a call computing the question; turn 2: the answer, wrong for every fourth row of the call."""
    expression = question.rstrip("=")
    if turn == 0:
        return f"<calc>{expression}</calc>", False
    value = int(evaluate(expression, 64))
    return str(value if row % 4 != 3 else value + 1), True


def test_a_forest_forks_rows_at_a_turn_boundary_into_children_that_share_the_prefix():
    trainer = calculator_trainer()
    policy = trainer.policy
    examples = [Example("3+4=", "7"), Example("9-5=", "4")]
    prompts = [policy.encode_prompt(e.prompt) for e in examples]
    sampler = Sampler(policy, ScriptedTurns(policy, call_then_answer), torch.Generator().manual_seed(0))
    forest = Forest(sampler, trainer.collector.environment, examples, prompts, SamplingParams(16, 1.0), [16, 16])
    roots = [forest.root(0), forest.root(1)]
    forest.advance(roots, turns=1)
    snapshot = forest.fork(roots[0])  # kept, never played on
    children = [forest.fork(r) for r in roots for _ in range(2)]
    forest.advance(roots + children)
    rows = [roots[0], children[0], children[1], roots[1], children[2], children[3]]
    episodes = forest.episodes(rows)
    tokens, records = episodes.generations.tokens, episodes.records
    for parent, kids in ((0, (1, 2)), (3, (4, 5))):
        first = records[parent].turns[0]
        for kid in kids:
            assert records[kid].turns[0] == first  # the same node, the same place
            assert torch.equal(tokens[kid, : first.observation_end], tokens[parent, : first.observation_end])
            assert records[kid].turns[1].start == first.observation_end
    assert len({record.turns[1].node for record in records}) == 6  # every second turn a node of its own
    assert forest.record(snapshot).turns == records[0].turns[:1] and not forest.done(snapshot)
    assert [r.solved for r in records] == [True, True, False, True, True, True]  # the fourth answer wrong
    # each token was generated once: the calls once per root, the answers once per row
    calls = sum(records[r].turns[0].end - records[r].turns[0].start for r in (0, 3))
    answers = sum(record.turns[1].end - record.turns[1].start for record in records)
    assert episodes.decoded == calls + answers < int(episodes.policy_tokens.sum())


def test_the_tree_generator_and_advantage_run_through_a_step_on_the_calculator():
    trainer = calculator_trainer()
    policy = trainer.policy
    collected = trainer.collector.collect(1, policy, ScriptedTurns(policy, call_then_answer), version=0)
    batch = collected.batch
    assert batch.group_sizes == [4, 4]
    # two roots per prompt, each split into two after its call: rows (root, child, root, child) of each group
    for g in range(2):
        rows = list(range(4 * g, 4 * g + 4))
        nodes = [batch.episodes[r].turns[0].node for r in rows]
        assert nodes[0] == nodes[1] != nodes[2] == nodes[3]
    # the second call answered each row in order: every fourth wrong
    assert batch.rewards.tolist() == [1.0, 1.0, 1.0, 0.0] * 2
    trainer.learner.compute_advantages(batch)
    std = torch.tensor([1.0, 1.0, 1.0, 0.0]).std().item() + EPS
    for g in range(2):
        first, second = 4 * g, 4 * g + 2
        calls = batch.episodes[first].turns[0], batch.episodes[second].turns[0]
        assert batch.advantages[first, calls[0].start] == pytest.approx((1.0 - 0.75) / std)  # V = 1, root 0.75
        assert batch.advantages[second, calls[1].start] == pytest.approx((0.5 - 0.75) / std)
        last = batch.episodes[second + 1].turns[1]
        assert batch.advantages[second + 1, last.start] == pytest.approx((0.0 - 0.5) / std)
        for row in (first + 1, second + 1):  # the call a child shares is trained in its root's row only
            call = batch.episodes[row].turns[0]
            assert not batch.token_mask[row, call.start : call.end].any()
            assert batch.token_mask[row - 1, call.start : call.end].all()
    trained = batch.trained_tokens().bool() & batch.token_mask
    assert float(trained.sum()) == collected.generated.decoded_tokens  # every token of the trees trained once


@pytest.mark.parametrize(("remaining", "paths", "levels_left", "expected"), [
    (8, 2, 0, [4, 4]),
    (7, 3, 0, [3, 2, 2]),  # the last level shares out the whole rest
    (8, 2, 1, [2, 2]),  # 2 paths x 2 x 2 = 8 leaves after the next level
    (9, 2, 1, [2, 2]),
    (3, 2, 1, [1, 1]),  # a path always goes on
])  # fmt: skip
def test_the_budget_is_split_evenly_over_the_live_paths(remaining, paths, levels_left, expected):
    assert children_per_path(remaining, paths, levels_left) == expected


def test_the_generator_needs_an_environment_and_budget_left_to_branch():
    with pytest.raises(ConfigError, match="environment.name: generate treeps"):
        small_config(generate={"name": "treeps"})
    with pytest.raises(ConfigError, match="generate.roots: 4 roots of a group of 4"):
        small_config(generate={"name": "treeps", "roots": 4}, environment={"name": "calculator"})
    with pytest.raises(ConfigError, match="no turn left to branch into"):
        small_config(generate={"name": "treeps", "branch_after": 2, "branch_levels": 2},
                     environment={"name": "calculator", "max_turns": 3})  # fmt: skip


# ---------------------------------------------------------------- Monte Carlo values of a constructed tree


def turn(start, end, observation_end, reward, node):
    return TurnRecord(start, end, observation_end, reward, "", True, node)


def constructed_trees() -> RolloutBatch:
    """Group 0: prompt -> a -> {a1: 1, a2: 0}, prompt -> b -> {b1: 1, b2: 1}. Group 1: prompt -> c (ends: 0),
    prompt -> d -> {d1 -> d1x: 1, d2: 1}. A turn holds 2 tokens, its observation 1."""
    two = lambda first, second, reward: [turn(0, 2, 3, 0.0, first), turn(3, 5, 6, reward, second)]  # noqa: E731
    episodes = [
        EpisodeRecord("", two("a", "a1", 1.0), solved=True),
        EpisodeRecord("", two("a", "a2", 0.0)),
        EpisodeRecord("", two("b", "b1", 1.0), solved=True),
        EpisodeRecord("", two("b", "b2", 1.0), solved=True),
        EpisodeRecord("", [turn(0, 2, 2, 0.0, "c")]),
        EpisodeRecord("", [*two("d", "d1", 0.0), turn(6, 8, 8, 1.0, "d1x")], solved=True),
        EpisodeRecord("", two("d", "d2", 1.0), solved=True),
    ]
    mask = torch.zeros(7, 8)
    for row, episode in enumerate(episodes):
        mask[row, : episode.turns[-1].observation_end] = 1
    policy = mask.bool() & ~torch.tensor([i in (2, 5) for i in range(8)])  # tokens 2 and 5: observations
    return RolloutBatch(
        examples=[Example("q0", "1"), Example("q1", "1")],
        group_sizes=[4, 3],
        prompt_ids=[[1], [1]],
        tokens=torch.zeros(7, 8, dtype=torch.long),
        logprobs=torch.zeros(7, 8),
        mask=mask,
        truncated=torch.zeros(7, dtype=torch.bool),
        texts=[""] * 7,
        born_step=0,
        rewards=torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]),
        episodes=episodes,
        policy_tokens=policy,
    )


def treeps(**knobs):
    cfg = small_config(method="treeps", advantage={"name": "treeps", **knobs})
    return ADVANTAGES.get("treeps")(cfg)


def unbiased_std(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def test_each_turn_gets_its_monte_carlo_value_minus_its_parents_by_hand():
    out = treeps()(constructed_trees())
    spread = [unbiased_std([1.0, 0.0, 1.0, 1.0]) + EPS, unbiased_std([0.0, 1.0, 1.0]) + EPS]
    # V(prompt 0) = 3/4, V(a) = 1/2, V(b) = 1, leaves their rewards; V(prompt 1) = 2/3, V(c) = 0, V(d) = 1
    by_hand = {
        (0, 0): (0.5 - 0.75) / spread[0], (0, 1): (1 - 0.5) / spread[0],
        (1, 0): (0.5 - 0.75) / spread[0], (1, 1): (0 - 0.5) / spread[0],
        (2, 0): (1 - 0.75) / spread[0], (2, 1): 0.0,
        (3, 0): (1 - 0.75) / spread[0], (3, 1): 0.0,
        (4, 0): (0 - 2 / 3) / spread[1],
        (5, 0): (1 - 2 / 3) / spread[1], (5, 1): 0.0, (5, 2): 0.0,  # one child: its value passes on unchanged
        (6, 0): (1 - 2 / 3) / spread[1], (6, 1): 0.0,
    }  # fmt: skip
    expected = torch.zeros(7, 8)
    batch = constructed_trees()
    for (row, k), value in by_hand.items():
        t = batch.episodes[row].turns[k]
        expected[row, t.start : t.end] = value
    assert torch.allclose(out.advantages, expected, atol=1e-6)
    assert out.in_loss.all()
    # each shared turn trains in the first row that holds it: a in row 0, b in row 2, d in row 5
    untrained = {(1, 0), (3, 0), (6, 0)}
    for row, episode in enumerate(batch.episodes):
        for k, t in enumerate(episode.turns):
            assert bool(out.token_mask[row, t.start : t.end].all()) == ((row, k) not in untrained)
    assert out.stats["pipeline/advantage/nodes_per_group"] == (6 + 5) / 2
    assert out.stats["pipeline/advantage/shared_turns"] == pytest.approx(3 / 11)
    assert out.stats["pipeline/advantage/turns_with_signal"] == pytest.approx(6 / 11)  # a, a1, a2, b, c, d


def test_along_a_path_the_process_advantages_add_up_to_the_outcome_advantage():
    batch = constructed_trees()
    advantages = treeps(scale="none")(batch).advantages
    for row, episode in enumerate(batch.episodes):
        group = 0 if row < 4 else 1
        mean = float(batch.rewards[batch.offsets[group] : batch.offsets[group + 1]].mean())
        path = sum(float(advantages[row, t.start]) for t in episode.turns)
        assert path == pytest.approx(float(batch.rewards[row]) - mean)


def test_shared_turns_may_train_in_every_leaf_and_rows_outside_a_tree_are_chains():
    assert treeps(shared_tokens="every_leaf")(constructed_trees()).token_mask is None
    batch = constructed_trees()
    batch.episodes = [
        EpisodeRecord("", [TurnRecord(t.start, t.end, t.observation_end, t.reward, "", True) for t in e.turns])
        for e in batch.episodes
    ]  # no node ids: every row its own path from the prompt
    out = treeps(scale="none")(batch)
    first_turns = out.advantages[:, 0]
    means = torch.tensor([0.75] * 4 + [2 / 3] * 3)
    assert torch.allclose(first_turns, batch.rewards - means)
    assert out.token_mask.all() and out.advantages[:, 3].abs().sum() == 0  # later turns: nothing new below


def test_the_advantage_needs_an_environment():
    with pytest.raises(ConfigError, match="environment.name: advantage treeps"):
        small_config(advantage={"name": "treeps"})


# ---------------------------------------------------------------- the tiny model's own trees


def generated_batches(trainer: Trainer) -> list[RolloutBatch]:
    """Every step's generated batch, as the collector commits it."""
    seen, commit = [], trainer.collector.commit

    def keep(gathered):
        seen.append(gathered.generated)
        return commit(gathered)

    trainer.collector.commit = keep
    return seen


def warmed_calculator_run(method: str) -> Trainer:
    """The tiny model warmed up on calculator episodes only, so that it calls the calculator and its trees branch."""
    cfg = small_config(method=method, schedule={"steps": 3}, rollout={"max_new_tokens": 20},
                       environment={"name": "calculator", "max_turns": 3, "demonstrated_calls": 1.0})  # fmt: skip
    return Trainer(cfg, MemoryReporter())


def test_the_tiny_models_trees_have_G_leaves_and_children_share_their_prefix_token_by_token():
    trainer = warmed_calculator_run("treeps")
    batches = generated_batches(trainer)
    assert trainer.run() == "succeeded"
    shared_nodes = 0
    for batch in batches:
        assert batch.group_sizes == [4] * 4
        for g in range(batch.num_groups):
            holders = {}
            for row in range(batch.offsets[g], batch.offsets[g + 1]):
                for t in batch.episodes[row].turns:
                    holders.setdefault(t.node, []).append((row, t))
            for held in holders.values():
                (first, shared), *others = held
                for row, t in others:
                    assert t == shared  # a shared node sits at the same place in every row
                    assert torch.equal(batch.tokens[row, : t.observation_end], batch.tokens[first, : t.observation_end])
                shared_nodes += len(others) > 0
        distinct = {t.node: t.end - t.start for e in batch.episodes for t in e.turns}
        assert batch.decoded_tokens == sum(distinct.values())  # the shared prefixes were generated once
    assert shared_nodes > 0, "no tree branched: the warmed model never called the calculator"
    assert any(r["pipeline/generate/branched_paths"] > 0 for r in trainer.reporter.metric_rows)
