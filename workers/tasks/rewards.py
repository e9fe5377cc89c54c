"""Reward functions. A run's reward is the weighted sum of the functions in `reward.weights`.

Each function takes the example and a finished completion and returns a float;
each is logged on its own as `reward/<name>/mean`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from workers.registry import Registry
from workers.tasks import Example, Task


@dataclass(frozen=True)
class Completion:
    text: str
    length: int  # generated tokens, the end-of-sequence token included
    truncated: bool  # stopped by max_new_tokens before an end-of-sequence token


class RewardFn(Protocol):
    def __call__(self, example: Example, completion: Completion) -> float: ...


REWARDS: Registry[type] = Registry("reward function")


@REWARDS.register("correct")
class Correct:
    """1 when the task's verifier accepts the completion, else 0."""

    def __init__(self, task: Task, cfg):
        self.task = task

    def __call__(self, example: Example, completion: Completion) -> float:
        return float(self.task.is_correct(example, completion.text))


@REWARDS.register("format")
class Format:
    """1 when the completion gives an answer in the task's format and ends on its own, else 0."""

    def __init__(self, task: Task, cfg):
        self.task = task

    def __call__(self, example: Example, completion: Completion) -> float:
        return float(not completion.truncated and self.task.format_ok(example, completion.text))


@REWARDS.register("length")
class LengthPenalty:
    """-length / max_new_tokens: a linear pressure towards short completions."""

    def __init__(self, task: Task, cfg):
        self.max_new_tokens = cfg.rollout.max_new_tokens

    def __call__(self, example: Example, completion: Completion) -> float:
        return -completion.length / self.max_new_tokens


@REWARDS.register("flawed-positive")
class FlawedPositive:
    """-1 for a correct completion whose derivation the flaw detector flags (FAPO's flawed positive), else 0.

    Its weight is FAPO's penalty lambda: with `correct: 1` and `flawed-positive: 0.5` a flawed
    positive earns 0.5, and under group normalisation its advantage is positive while a group
    holds more wrong than fully correct completions and negative once the fully correct ones
    outnumber the wrong: a shortcut early, penalised later, with no schedule to tune
    ((1 - lambda)(correct + wrong) > correct, at lambda = 1/2).
    """

    def __init__(self, task: Task, cfg):
        from workers.tasks.flaws import FLAW_DETECTORS

        self.task, self.detector = task, FLAW_DETECTORS.get(cfg.reward.flaw_detector)()

    def __call__(self, example: Example, completion: Completion) -> float:
        flawed = self.task.is_correct(example, completion.text) and self.detector(example, completion.text)
        return -1.0 if flawed else 0.0


@REWARDS.register("overlong")
class SoftOverlong:
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13).

    0 up to L - B tokens; (L - B - length) / B inside the last B tokens; -1 when
    truncated. L = rollout.max_new_tokens, B = reward.overlong_buffer.
    """

    def __init__(self, task: Task, cfg):
        self.limit, self.buffer = (
            cfg.rollout.max_new_tokens,
            min(cfg.reward.overlong_buffer, cfg.rollout.max_new_tokens),
        )

    def __call__(self, example: Example, completion: Completion) -> float:
        if completion.truncated:
            return -1.0
        free = self.limit - self.buffer
        return 0.0 if completion.length <= free else (free - completion.length) / self.buffer


def build_rewards(task: Task, cfg) -> dict[str, tuple[float, RewardFn]]:
    return {name: (weight, REWARDS.get(name)(task, cfg)) for name, weight in cfg.reward.weights.items()}
