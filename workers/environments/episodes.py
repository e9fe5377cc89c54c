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
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    def __init__(self, episode, start_state: str):
        self.episode = episode
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.policy: list[bool] = []
        self.record = EpisodeRecord(start_state)
        self.done = False

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
    owners = [g for g, size in enumerate(sizes) for _ in range(size)]
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator, device=ctx.generator.device))
    rng = np.random.default_rng(seed)  # the environments' own randomness, drawn from the run's stream
    rows = []
    for g in owners:
        episode = environment.reset(examples[g], rng)
        rows.append(_Row(episode, episode.start_state))
    stop = StopRule(abort=StopStrings(ctx.policy, environment.stop_strings)) if environment.stop_strings else None
    for _ in range(environment.max_turns):
        going = [r for r, row in enumerate(rows) if not row.done]
        if not going:
            break
        turn_limits = [limits[owners[r]] for r in going]
        out = generate_turn(ctx, [rows[r] for r in going], [prompt_ids[owners[r]] for r in going], params,
                            turn_limits, stop)  # fmt: skip
        for i, r in enumerate(going):
            take_turn(ctx, rows[r], out, i, environment.max_episode_tokens)
    return assembled(ctx, rows)


def generate_turn(ctx, rows: list[_Row], prompts: list[list[int]], params, turn_limits, stop) -> Generations:
    """The next turn of each row, every row its own prompt (each continues its own prefix, with its own limit)."""
    prefixes = [row.prefix() for row in rows]
    limits = [len(row.tokens) + limit for row, limit in zip(rows, turn_limits)]
    if not any(prefixes):
        prefixes = None
    return ctx.backend.generate(prompts, 1, params, ctx.generator, limits=limits, prefixes=prefixes, stop=stop)


def take_turn(ctx, row: _Row, out: Generations, i: int, max_episode_tokens: int) -> None:
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
    row.record.turns.append(TurnRecord(start, end, len(row.tokens), answer.reward, answer.state, answer.well_formed))
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
