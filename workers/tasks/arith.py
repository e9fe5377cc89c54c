"""`arith`: integer expressions such as `47-8*3=`; the completion is the exact result.

Difficulty knobs: `task.digits` (most digits per operand), `task.operands` and
`task.operators`; `task.min_operands` and `task.length_tail` make the operand count vary
from problem to problem (a long tail of long problems). The held-out split is drawn from a fixed seed so every run of
a config evaluates on the same problems, and training never samples them.
"""

from __future__ import annotations

import re

import numpy as np

from workers.tasks import Example, held_out_size, held_out_split, sha256_lines
from workers.tasks.expressions import ParseError, parse

_INTEGER = re.compile(r"^-?\d+$")
EVAL_SEED = 1_000_003  # the held-out split's own seed, independent of the run's


class ArithTask:
    """Integer +, -, x expressions with operator precedence; exact-match verifier."""

    name = "arith"
    instruction = ""  # the tiny model reads the bare question

    def __init__(self, cfg):
        self.digits, self.operands, self.operators = cfg.task.digits, cfg.task.operands, cfg.task.operators
        self.counts, self.count_weights = operand_counts(cfg.task)
        self.warmup_digits = min(cfg.task.warmup_digits, self.digits)
        self.warmup_operands = min(cfg.task.warmup_operands, self.operands)
        self.warmup_full_share = cfg.task.warmup_full_share
        size = held_out_size(cfg.eval.size, cfg.task.problem_space())
        self._held_out_examples = held_out_split(lambda rng: self.draw(rng, self.digits), size, EVAL_SEED)
        self._eval = self._held_out_examples[: cfg.eval.size]
        self._held_out = {e.prompt for e in self._held_out_examples}

    def draw_count(self, rng: np.random.Generator) -> int:
        if len(self.counts) == 1:  # a fixed size draws nothing, so fixed-size streams stay as they were
            return self.counts[0]
        return int(rng.choice(self.counts, p=self.count_weights))

    def draw(self, rng: np.random.Generator, digits: int, count: int | None = None) -> Example:
        count = count or self.draw_count(rng)
        operands = [int(rng.integers(0, 10**digits)) for _ in range(count)]
        ops = [self.operators[int(rng.integers(len(self.operators)))] for _ in range(count - 1)]
        text = str(operands[0]) + "".join(op + str(x) for op, x in zip(ops, operands[1:]))
        return Example(prompt=f"{text}=", answer=str(int(parse(text).value)))

    def _draw_training(self, rng: np.random.Generator, digits: int, count: int | None = None) -> Example:
        while True:  # rejection keeps the held-out problems out of training
            example = self.draw(rng, digits, count)
            if example.prompt not in self._held_out:
                return example

    def train_batch(self, n: int, rng: np.random.Generator) -> list[Example]:
        # the count is drawn before the rejection loop, so held-out problems do not skew the counts
        return [self._draw_training(rng, self.digits, self.draw_count(rng)) for _ in range(n)]

    def eval_examples(self) -> list[Example]:
        return list(self._eval)

    def warmup_pairs(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        pairs = []
        for _ in range(n):
            if rng.random() < self.warmup_full_share:
                example = self._draw_training(rng, self.digits, self.draw_count(rng))
            else:
                example = self._draw_training(rng, self.warmup_digits, self.warmup_operands)
            pairs.append((example.prompt, self.target(example, rng)))
        return pairs

    def target(self, example: Example, rng: np.random.Generator | None = None) -> str:
        """The completion the warm-start teaches: here the bare result."""
        return example.answer

    def answer_key(self, example: Example, completion: str) -> str | None:
        text = completion.strip()
        return str(int(text)) if _INTEGER.match(text) else None

    def is_correct(self, example: Example, completion: str) -> bool:
        return self.answer_key(example, completion) == example.answer

    def format_ok(self, example: Example, completion: str) -> bool:
        return self.answer_key(example, completion) is not None

    def fingerprint(self) -> str:
        knobs = f"{self.name} digits={self.digits} operands={self.operands} operators={self.operators}"
        if len(self.counts) > 1:
            knobs += f" counts={self.counts} weights={[round(w, 12) for w in self.count_weights]}"
        return sha256_lines([knobs, *(e.prompt + e.answer for e in self._held_out_examples)])


def operand_counts(task_cfg) -> tuple[list[int], list[float]]:
    """The operand counts a problem may have and their probabilities: P(k) ∝ length_tail^(k - min_operands)."""
    counts = task_cfg.operand_range()
    low = counts[0]
    weights = np.array([task_cfg.length_tail ** (k - low) for k in counts])
    return counts, list(weights / weights.sum())


__all__ = ["ArithTask", "ParseError", "operand_counts"]
