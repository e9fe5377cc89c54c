"""`chain`: arith's expressions, worked one operation at a time: prompt `3+4*2-5=`, completion `3+8-5=11-5=6`.

The completion rewrites the expression after each operation (x first, then + and - from the
left), so its length grows with the square of the operand count: with `task.min_operands` and
`task.length_tail` the testbed has the long tail of completion lengths that the length- and
budget-aware methods are built for (partial rollouts, length schedules, aborts), while each
step stays within reach of the tiny model.

The outcome verifier reads only the last number of the chain: a completion that skips steps
(`3+4*2-5=6`) is right if its result is, so a length-aware method may learn to compress.
`task.shortcut_share` puts shortened derivations into the warm-start data, so the model starts
out writing derivations of different lengths for one problem.
"""

from __future__ import annotations

import re

import numpy as np

from workers.tasks import Example, sha256_lines
from workers.tasks.arith import ArithTask
from workers.tasks.expressions import ParseError, parse, tokenize

_INTEGER = re.compile(r"^-?\d+$")


def derivation(expression: str) -> list[str]:
    """The expression after each operation, ending with its value: "3+4*2-5" -> ["3+8-5", "11-5", "6"]."""
    values, operators = _split(expression)
    steps = []
    while operators:
        at = operators.index("*") if "*" in operators else 0
        left, right, op = values[at], values[at + 1], operators[at]
        values[at : at + 2] = [left * right if op == "*" else left + right if op == "+" else left - right]
        del operators[at]
        steps.append(str(values[0]) + "".join(o + str(v) for o, v in zip(operators, values[1:])))
    return steps


def _split(expression: str) -> tuple[list[int], list[str]]:
    tokens = tokenize(expression)  # a prompt's numbers are non-negative: numbers and operators alternate
    return [int(t) for t in tokens[0::2]], tokens[1::2]


class ChainTask(ArithTask):
    """arith with its working written out; the verifier checks the chain's last number."""

    name = "chain"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.shortcut_share = cfg.task.shortcut_share

    def target(self, example: Example, rng: np.random.Generator | None = None) -> str:
        """The whole derivation; with task.shortcut_share, sometimes one that skips steps (rng decides)."""
        steps = derivation(example.prompt.rstrip("="))
        if rng is not None and self.shortcut_share and rng.random() < self.shortcut_share:
            steps = [step for step in steps[:-1] if rng.random() < 0.5] + steps[-1:]
        return "=".join(steps)

    def fingerprint(self) -> str:
        # the held-out split does not depend on shortcut_share, but the warm-start data does
        plain = super().fingerprint()
        return sha256_lines([plain, f"shortcut_share={self.shortcut_share}"]) if self.shortcut_share else plain

    def answer_key(self, example: Example, completion: str) -> str | None:
        last = completion.strip().rsplit("=", 1)[-1].strip()
        return str(int(last)) if _INTEGER.match(last) else None

    def format_ok(self, example: Example, completion: str) -> bool:
        """Every step is an expression and the last is a number."""
        try:
            for step in completion.strip().split("="):
                parse(step)
        except ParseError:
            return False
        return self.answer_key(example, completion) is not None


__all__ = ["ChainTask", "derivation"]
