"""`countdown`: reach a target from given numbers, e.g. prompt `3 7 12->33:`, completion `3*7+12`.

The verifier parses the expression itself (never `eval`): it must use each
given number exactly once, no other number, and equal the target exactly.
`task.operands` numbers of at most `task.digits` digits are drawn; the target is
the value of a random expression over all of them, so every problem has a solution.

The order in which the numbers are listed does not change the problem, so the
held-out split is kept by canonical problem (the sorted numbers and the target):
training never sees a held-out problem with its numbers reordered.
"""

from __future__ import annotations

import numpy as np

from workers.tasks import Example, held_out_size, held_out_split, sha256_lines
from workers.tasks.counting import canonical_problem_count
from workers.tasks.expressions import ParseError, parse

EVAL_SEED = 2_000_003


def canonical(example: Example) -> tuple[tuple[int, ...], str]:
    """The problem behind a prompt: its numbers in sorted order and its target."""
    return tuple(sorted(example.numbers)), example.answer


class CountdownTask:
    """Combine the given numbers with + - x / and parentheses to hit the target."""

    name = "countdown"
    instruction = ""  # the tiny model reads the bare question

    def __init__(self, cfg):
        self.digits, self.count, self.operators = cfg.task.digits, cfg.task.operands, cfg.task.operators
        self.warmup_digits = min(cfg.task.warmup_digits, self.digits)
        self.warmup_count = min(cfg.task.warmup_operands, self.count)
        self.warmup_full_share = cfg.task.warmup_full_share
        size = held_out_size(cfg.eval.size, cfg.task.problem_space())
        self._held_out_examples = held_out_split(
            lambda rng: self.draw(rng, self.digits, self.count)[0], size, EVAL_SEED, key=canonical
        )
        self._eval = self._held_out_examples[: cfg.eval.size]
        self._held_out = {canonical(e) for e in self._held_out_examples}

    def draw(self, rng: np.random.Generator, digits: int, count: int) -> tuple[Example, str]:
        """A problem and one solution, found by building a random expression first."""
        while True:
            numbers = [int(rng.integers(1, 10 ** int(rng.integers(1, digits + 1)))) for _ in range(count)]
            order = [int(i) for i in rng.permutation(count)]
            solution = str(numbers[order[0]])
            for i in order[1:]:
                op = self.operators[int(rng.integers(len(self.operators)))]
                solution = f"{solution}{op}{numbers[i]}"
            value = parse(solution).value
            if value.denominator == 1 and value > 0:
                prompt = " ".join(map(str, numbers)) + f"->{int(value)}:"
                return Example(prompt=prompt, answer=str(int(value)), numbers=tuple(numbers)), solution

    def _draw_training(self, rng, digits, count) -> tuple[Example, str]:
        while True:
            example, solution = self.draw(rng, digits, count)
            if canonical(example) not in self._held_out:
                return example, solution

    def train_batch(self, n: int, rng: np.random.Generator) -> list[Example]:
        return [self._draw_training(rng, self.digits, self.count)[0] for _ in range(n)]

    def eval_examples(self) -> list[Example]:
        return list(self._eval)

    def warmup_pairs(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        """The easier slice: fewer, smaller numbers; a share of full-difficulty problems is mixed in."""
        pairs = []
        for _ in range(n):
            full = rng.random() < self.warmup_full_share
            digits, count = (self.digits, self.count) if full else (self.warmup_digits, self.warmup_count)
            example, solution = self._draw_training(rng, digits, count)
            pairs.append((example.prompt, solution))
        return pairs

    def answer_key(self, example: Example, completion: str) -> str | None:
        """The value the expression reaches, if it uses exactly the given numbers."""
        try:
            parsed = parse(completion)
        except ParseError:
            return None
        if sorted(parsed.numbers) != sorted(example.numbers):
            return None
        value = parsed.value
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"

    def is_correct(self, example: Example, completion: str) -> bool:
        return self.answer_key(example, completion) == example.answer

    def format_ok(self, example: Example, completion: str) -> bool:
        try:
            parse(completion)
        except ParseError:
            return False
        return True

    def fingerprint(self) -> str:
        knobs = f"countdown digits={self.digits} count={self.count} operators={self.operators}"
        return sha256_lines([knobs, *(e.prompt for e in self._held_out_examples)])


__all__ = ["CountdownTask", "canonical", "canonical_problem_count"]  # the count lives in counting.py
