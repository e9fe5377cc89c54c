"""What every environment implements: an Episode per row, and the turn it answers with.

Torch-free: an environment reads and writes text; the sampler (workers/environments/episodes.py) turns it into
tokens, and keeps which of them the policy wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from workers.tasks import Example


@dataclass(frozen=True)
class Turn:
    """The environment's answer to one policy turn."""

    observation: str  # what the policy reads next ("" when done): a tool's result, an error, the new board
    reward: float  # this turn's reward part (an episode's reward is the sum of its turns')
    done: bool  # the episode is over: answered, solved, failed, or out of turns
    state: str  # a key of the environment's state after the turn: equal keys, equal states (step-level groups)
    well_formed: bool = True  # the turn followed the environment's format (a tool call it could parse)
    solved: bool = False  # the episode ended with the task done (its success)
    action: str = ""  # what the environment read in the turn (a call's expression, the moves): the inspector shows it


class Episode(Protocol):
    """One row's conversation with the environment, from reset to done."""

    opening: str  # the first observation: what the policy reads before its first turn (the task's question)
    start_state: str  # the state key before the first turn

    def step(self, turn: str) -> Turn:
        """The environment's answer to the policy's turn (its text, the stop string that ended it included)."""
        ...


class Environment(Protocol):
    stop_strings: tuple[str, ...]  # strings that end a policy turn, besides the model's end-of-turn token
    max_turns: int  # policy turns in an episode at most: the last one ends it whatever it says
    max_episode_tokens: int  # tokens after the prompt at most, turns and observations together (EpisodeKnobs)

    def reset(self, example: Example, rng: np.random.Generator) -> Episode:
        """A new episode for the task example, its randomness (if any) drawn from `rng`."""
        ...

    def demonstrations(self, pairs: list[tuple[str, str]], rng: np.random.Generator) -> list[tuple[str, str]]:
        """The tiny model's warm-up (prompt, target) pairs with some targets written as whole episodes (the turns
        and the observations), so that the policy starts out knowing the environment's format."""
        ...


def last_call(turn: str, call: re.Pattern) -> str | None:
    """What the turn's last closed call (a match of `call`, its argument group 1) holds, if the turn ends with it:
    what a stop at the call's closing tag leaves. A turn that goes on after its call, or has none, is an answer."""
    calls = list(call.finditer(turn))
    if not calls or turn[calls[-1].end() :].strip():
        return None
    return calls[-1].group(1)
