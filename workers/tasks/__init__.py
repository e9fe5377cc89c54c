"""Verifiable tasks: where prompts come from and how a completion is judged.

A task yields training prompts, a fixed held-out evaluation split, and an
easier slice for the tiny model's warm-start, and it verifies completions.
Tasks are declared by name with their knobs in knobs.py (which RunConfig reads, so this
package never imports the config); `build_task(cfg)` is the only entry point.

    task = build_task(cfg)                       # cfg: RunConfig
    batch = task.train_batch(16, np.random.default_rng(0))
    task.is_correct(batch[0], "46")
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from workers.tasks.knobs import TASKS


@dataclass(frozen=True)
class Example:
    """One prompt and what a correct completion must produce."""

    prompt: str
    answer: str  # the canonical answer (arith: "46"; countdown: the target; files: the number)
    numbers: tuple[int, ...] = ()  # countdown only: the numbers the expression may use


class Task(Protocol):
    name: str
    # how a completion should give its final answer, said to a real model after the question (prompt.instruction
    # overrides it); "" for the generated tasks, whose tiny model reads the bare question
    instruction: str

    def train_batch(self, n: int, rng: np.random.Generator) -> list[Example]: ...

    def eval_examples(self) -> list[Example]: ...

    def warmup_pairs(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        """(prompt, target completion) pairs from the easier slice, for supervised warm-start."""
        ...

    def answer_key(self, example: Example, completion: str) -> str | None:
        """The answer a completion commits to, normalised for majority voting; None if it gives none."""
        ...

    def is_correct(self, example: Example, completion: str) -> bool: ...

    def format_ok(self, example: Example, completion: str) -> bool: ...

    def fingerprint(self) -> str:
        """sha256 identifying the data: the generator's knobs and held-out split, or the files' bytes."""
        ...


# Generated tasks hold out this many problems (or eval.size, if larger) from training, whatever
# eval.size is, so the training stream and the warm-started model do not depend on eval.size;
# evaluation uses the first eval.size of them.
HELD_OUT = 500


def problem_space(task_cfg) -> int | None:
    """How many distinct problems a generated task can draw (at most); None for file tasks.

    Each task's knobs answer for it (workers/tasks/knobs.py), counting problems as its held-out
    split tells them apart."""
    return task_cfg.problem_space()


def by_prompt(example: Example) -> str:
    return example.prompt


def held_out_split(draw, size: int, seed: int, key=by_prompt) -> list[Example]:
    """The first `size` distinct problems that draw(rng) yields from its own fixed seed.

    Two examples are the same problem when key(example) is equal: the prompt by default;
    a task whose prompts can restate one problem in several ways passes its canonical form.
    """
    rng = np.random.default_rng(seed)
    held: dict[object, Example] = {}
    for _ in range(size * 50):
        if len(held) == size:
            break
        example = draw(rng)
        held.setdefault(key(example), example)
    return list(held.values())


def held_out_size(eval_size: int, space: int) -> int:
    """How many problems a generated task keeps out of training: HELD_OUT, at most half the problem space.

    RunConfig already refuses an eval.size above half the space (see its validator)."""
    return min(max(HELD_OUT, eval_size), space // 2)


def load_task_class(name: str) -> type:
    """The task's class, imported from where its declaration says (workers/tasks/knobs.py)."""
    return TASKS.get(name)


def build_task(cfg) -> Task:
    """The task a RunConfig names, loaded and checked (file tasks raise DatasetError on bad files)."""
    return load_task_class(cfg.task.name)(cfg)


def sha256_lines(lines) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()
