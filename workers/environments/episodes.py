"""Multi-turn rollouts: the episodes of a batch's rows, generated together turn by turn.

    episodes = run_episodes(Sampler(policy, backend, generator), environment, examples, prompt_ids, sizes, params,
                            limits)
    episodes.generations    # each row's whole episode after its prompt: the policy's turns and the observations
    episodes.policy_tokens  # (N, T) bool: the tokens the policy wrote, the only ones the loss reads

Every row starts as a sample of its group's prompt. At each turn the rows still going are generated together, each
continuing from its own prefix (the backend's resumable generation: the prompt, then the tokens of the turns and
observations so far); a row's turn ends at the model's end-of-turn token, at one of the environment's stop strings,
or at rollout.max_new_tokens, the limit of one turn. The environment reads the turn's text and answers; its
observation is encoded as the model reads it (policy.prompts.observation_ids: a message in the chat template, or
the text as it is) and appended with log-probability 0. A row is done when the environment says so, after its
max_turns-th turn, or once its episode holds max_episode_tokens tokens (then it is truncated).

Rollout trees. A generate component may grow each group as a tree instead (treeps, trace): `Forest` holds the rows,
advances the ones it is given turn by turn, and forks a row at a turn boundary into a new row that holds a copy of
its prefix (the tokens so far, their log-probabilities, its turn records) and of its episode's state, and goes on
from there on its own:

    forest = Forest(sampler, environment, examples, prompt_ids, params, limits)
    roots = [forest.root(g) for g in range(len(examples)) for _ in range(2)]
    forest.advance(roots, turns=1)          # every root's first turn
    children = [forest.fork(r) for r in roots if not forest.done(r)]
    forest.advance(roots + children)        # to the end
    episodes = forest.episodes(rows)        # the rows kept, in this order (a batch: group by group)

Every turn is a node of its group's tree (TurnRecord.node): a forked row shares its parent's turn records, so the
rows that hold a node are the leaves below it, and a turn's parent is the row's turn before it (the first turn's is
the prompt). A fork copies its episode with copy.deepcopy, the environment and what it holds (its task, a corpus)
and the example shared, not copied: an episode needs no method of its own to be forked.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from workers.rollout import Generations, Partial, Prefix, SamplingParams, StopRule


@dataclass(frozen=True)
class TurnRecord:
    """One policy turn of an episode: where its tokens are in the row's completion, and the environment's answer."""

    start: int  # the turn's first token in the completion (after the prompt)
    end: int  # one past its last token; the observation, if any, follows until observation_end
    observation_end: int
    reward: float
    state: str  # the environment's state key after the turn
    well_formed: bool
    # the turn's node in its group's rollout tree: the rows holding the same node share this turn and every token
    # before it (a fork's prefix); None for a turn made outside a Forest (a constructed record)
    node: str | None = None
    action: str = ""  # what the environment read in the turn (Turn.action: a call's expression), for the inspector


@dataclass
class EpisodeRecord:
    """A row's episode: its turns, the state it started in, and how it ended."""

    start_state: str
    turns: list[TurnRecord] = field(default_factory=list)
    solved: bool = False
    truncated: bool = False  # cut by a token limit, not ended by the environment
    final_turn: str = ""  # the text of its last turn (what the task's answer key reads)

    @property
    def reward(self) -> float:
        return sum(turn.reward for turn in self.turns)


@dataclass
class Episodes:
    generations: Generations  # mask 1 on every token of the episode, the observations' included
    policy_tokens: torch.Tensor  # (N, T) bool
    records: list[EpisodeRecord]
    decoded: int  # tokens the policy generated over all turns (observations are not decoded)


@dataclass
class Sampler:
    """What generates the policy's turns: the policy (its tokenizer and ids), a rollout backend and the RNG."""

    policy: object
    backend: object
    generator: torch.Generator


class _Row:
    def __init__(self, episode, start_state: str, group: int):
        self.episode = episode
        self.group = group  # the example (and prompt) it is an episode of
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.policy: list[bool] = []
        self.record = EpisodeRecord(start_state)
        self.done = False

    def going(self, max_turns: int) -> bool:
        """Not over: the environment has not ended it and it holds fewer than `max_turns` turns."""
        return not self.done and len(self.record.turns) < max_turns

    def prefix(self) -> Prefix | None:
        return Prefix(tuple(self.tokens), tuple(self.logprobs)) if self.tokens else None

    def append(self, tokens: list[int], logprobs: list[float], policy: bool) -> None:
        self.tokens += tokens
        self.logprobs += logprobs
        self.policy += [policy] * len(tokens)


class StopStrings:
    """A stop rule's predicate: the rows whose new text holds one of the environment's stop strings."""

    def __init__(self, policy, strings: tuple[str, ...]):
        self.policy, self.strings = policy, strings

    def __call__(self, partial: Partial) -> torch.Tensor:
        cut = torch.zeros_like(partial.finished)
        for row in (~partial.finished).nonzero().flatten().tolist():
            text = self.policy.decode(partial.tokens[row].tolist())
            cut[row] = any(s in text for s in self.strings)
        return cut


def run_episodes(ctx: Sampler, environment, examples, prompt_ids, sizes, params: SamplingParams, limits) -> Episodes:
    """Every row's episode: sizes[g] rows of examples[g], each turn limited to limits[g] tokens."""
    forest = Forest(ctx, environment, examples, prompt_ids, params, limits)
    rows = [forest.root(g) for g, size in enumerate(sizes) for _ in range(size)]
    forest.advance(rows)
    return forest.episodes(rows)


class Forest:
    """The rows of one generation as trees: roots started from their example, forks of a row at a turn boundary.

    Rows are numbered in the order they are made; a component advances the rows it chooses, forks the ones it
    wants to branch, and assembles the rows it keeps (a row it never assembles, a snapshot kept to fork later,
    costs nothing but the tokens it was generated with, which `decoded` counts once).
    """

    def __init__(self, ctx: Sampler, environment, examples, prompt_ids, params: SamplingParams, limits):
        self.ctx, self.environment, self.params = ctx, environment, params
        # per group, in the order groups were added (a pool adds its groups after the Forest is made)
        self.examples, self.prompt_ids, self.limits = list(examples), list(prompt_ids), list(limits)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator, device=ctx.generator.device))
        self.rng = np.random.default_rng(seed)  # the environments' own randomness, drawn from the run's stream
        self.tree = f"{seed:x}"  # names this generation's nodes apart from another's joining the same groups
        self.nodes = 0
        self.rows: list[_Row] = []
        self.decoded = 0  # tokens the policy generated, each once, whichever rows came to hold them
        self.turns = 0  # calls of the backend, each the next turn of every row advanced
        strings = environment.stop_strings
        self.stop = StopRule(abort=StopStrings(ctx.policy, strings)) if strings else None

    def add_group(self, example, prompt_ids: list[int], limit: int) -> int:
        """A further group (its example, prompt and turn limit), to start roots of or adopt rows into."""
        self.examples.append(example)
        self.prompt_ids.append(prompt_ids)
        self.limits.append(limit)
        return len(self.examples) - 1

    def adopt(self, row: _Row, group: int) -> int:
        """A row of an earlier generation (an episode a pool carried over) as a row of this one, of `group`, to go on
        from where it stopped: its next turn is generated by the present policy."""
        row.group = group
        self.rows.append(row)
        return len(self.rows) - 1

    def row(self, row: int) -> _Row:
        return self.rows[row]

    def root(self, group: int) -> int:
        """A new row: an episode of examples[group] from its start."""
        episode = self.environment.reset(self.examples[group], self.rng)
        self.rows.append(_Row(episode, episode.start_state, group))
        return len(self.rows) - 1

    def fork(self, row: int) -> int:
        """A new row that holds row's prefix and a copy of its episode's state, to go on from there on its own."""
        parent = self.rows[row]
        episode = forked(parent.episode, self.environment, self.examples[parent.group])
        child = _Row(episode, parent.record.start_state, parent.group)
        child.tokens, child.logprobs, child.policy = list(parent.tokens), list(parent.logprobs), list(parent.policy)
        child.record = replace(parent.record, turns=list(parent.record.turns))
        child.done = parent.done
        self.rows.append(child)
        return len(self.rows) - 1

    def done(self, row: int) -> bool:
        return self.rows[row].done

    def record(self, row: int) -> EpisodeRecord:
        return self.rows[row].record

    def advance(self, rows: list[int], turns: int | None = None, until=None) -> None:
        """The rows' next turns, generated together, until each is done, has max_turns turns, or (if `turns` is
        given) holds that many turns in all; or, if `until` is given, as soon as `until()` is true after a turn."""
        limit = self.environment.max_turns if turns is None else min(turns, self.environment.max_turns)
        while True:
            going = [r for r in rows if self.rows[r].going(limit)]
            if not going or (until is not None and until()):
                return
            sent = [self.rows[r] for r in going]
            self.turns += 1
            out = generate_turn(self.ctx, sent, [self.prompt_ids[row.group] for row in sent], self.params,
                                [self.limits[row.group] for row in sent], self.stop)  # fmt: skip
            for i, row in enumerate(sent):
                before = len(row.tokens)
                take_turn(self.ctx, row, out, i, self.environment.max_episode_tokens, self.new_node())
                self.decoded += row.record.turns[-1].end - before

    def new_node(self) -> str:
        self.nodes += 1
        return f"{self.tree}.{self.nodes}"

    def episodes(self, rows: list[int]) -> Episodes:
        """The given rows' episodes, in this order."""
        episodes = assembled(self.ctx, [self.rows[r] for r in rows])
        episodes.decoded = self.decoded
        return episodes


def forked(episode, environment, example):
    """A copy of an episode's state that steps on its own. What the episode reads but does not own is shared, not
    copied: the environment, what the environment holds (its task, a corpus, its knobs) and the example."""
    shared = {id(environment): environment, id(example): example}
    shared.update({id(value): value for value in getattr(environment, "__dict__", {}).values()})
    return copy.deepcopy(episode, shared)


def generate_turn(ctx, rows: list[_Row], prompts: list[list[int]], params, turn_limits, stop) -> Generations:
    """The next turn of each row, every row its own prompt (each continues its own prefix, with its own limit)."""
    prefixes = [row.prefix() for row in rows]
    limits = [len(row.tokens) + limit for row, limit in zip(rows, turn_limits)]
    if not any(prefixes):
        prefixes = None
    return ctx.backend.generate(prompts, 1, params, ctx.generator, limits=limits, prefixes=prefixes, stop=stop)


def take_turn(ctx, row: _Row, out: Generations, i: int, max_episode_tokens: int, node: str | None = None) -> None:
    """Row `i` of the turn's generations: its new tokens, the environment's answer, the observation after them."""
    start, length = len(row.tokens), int(out.lengths[i])
    new_tokens, new_logprobs = out.tokens[i, start:length].tolist(), out.logprobs[i, start:length].tolist()
    row.append(new_tokens, new_logprobs, policy=True)
    text = ctx.policy.decode(new_tokens)
    answer = row.episode.step(text)
    ended_turn = bool(new_tokens) and new_tokens[-1] == ctx.policy.eos_id
    observation = [] if answer.done else ctx.policy.prompts.observation_ids(answer.observation, ended_turn)
    end = len(row.tokens)
    row.append(observation, [0.0] * len(observation), policy=False)
    observed = (len(row.tokens), answer.reward, answer.state, answer.well_formed)
    row.record.turns.append(TurnRecord(start, end, *observed, node=node, action=answer.action))
    row.record.final_turn = text
    if answer.done:
        row.done, row.record.solved = True, answer.solved
        row.record.truncated = bool(out.truncated[i])  # the answer was cut by the turn's limit
    elif len(row.tokens) >= max_episode_tokens:
        row.done, row.record.truncated = True, True


def assembled(ctx, rows: list[_Row]) -> Episodes:
    """The rows' episodes as right-padded (N, T) tensors."""
    width = max(1, max(len(row.tokens) for row in rows))
    tokens = torch.full((len(rows), width), ctx.policy.pad_id, dtype=torch.long)
    logprobs, mask = torch.zeros(len(rows), width), torch.zeros(len(rows), width)
    policy = torch.zeros(len(rows), width, dtype=torch.bool)
    for r, row in enumerate(rows):
        n = len(row.tokens)
        tokens[r, :n], logprobs[r, :n] = torch.tensor(row.tokens, dtype=torch.long), torch.tensor(row.logprobs)
        mask[r, :n], policy[r, :n] = 1, torch.tensor(row.policy, dtype=torch.bool)
    truncated = torch.tensor([row.record.truncated for row in rows])
    generations = Generations(tokens, logprobs, mask, truncated)
    return Episodes(generations, policy, [row.record for row in rows], int(policy.sum()))
