"""The single-turn marker: a rollout is one completion, sampled by the generate stage as it always was."""

from __future__ import annotations


class SingleTurn:
    stop_strings: tuple[str, ...] = ()
    max_turns = 1

    def __init__(self, knobs, task):
        pass

    def reset(self, example, rng):
        raise TypeError("a single-turn task has no episodes: its completions are judged by the reward functions")
