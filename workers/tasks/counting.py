"""How many distinct problems a generated task can draw: pure Python, read by the task knobs' validation.

RunConfig refuses an eval.size that would hold out more than half of a task's problems, and the
web side validates every config, so this counting imports nothing heavier than the standard library.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

# Counting the canonical problems exactly means evaluating every ordering and operator choice
# of every multiset of numbers; past this many evaluations the count is bounded instead.
EXACT_COUNT_LIMIT = 200_000


def expression_value(numbers: tuple[int, ...], operators: tuple[str, ...]) -> int:
    """n0 op0 n1 op1 n2 ... with x binding tighter than + and -, as parse() reads it."""
    total, sign, term = 0, 1, numbers[0]
    for op, x in zip(operators, numbers[1:]):
        if op == "*":
            term *= x
        else:
            total, sign, term = total + sign * term, 1 if op == "+" else -1, x
    return total + sign * term


@lru_cache(maxsize=64)
def canonical_problem_count(digits: int, count: int, operators: str) -> int:
    """Distinct (sorted numbers, target) problems the generator can draw; exact when small, else an upper bound."""
    largest = 10**digits - 1
    multisets = math.comb(largest + count - 1, count)
    orderings = math.factorial(count) * len(operators) ** (count - 1)
    if multisets * orderings > EXACT_COUNT_LIMIT:
        return multisets * orderings
    total = 0
    for numbers in itertools.combinations_with_replacement(range(1, largest + 1), count):
        targets = {
            expression_value(order, ops)
            for order in set(itertools.permutations(numbers))
            for ops in itertools.product(operators, repeat=count - 1)
        }
        total += sum(1 for t in targets if t > 0)
    return total


def expression_count(digits: int, counts: list[int], operators: str) -> int:
    """Distinct arith prompts: operand values x operator choices, summed over the operand counts (order matters)."""
    values, choices = 10**digits, len(operators)
    return sum(values**k * choices ** (k - 1) for k in counts)
