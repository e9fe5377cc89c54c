"""Final answers: where a completion commits to one (`#### x`, GSM8K's mark, or `\\boxed{x}`, MATH's), and the two
verifiers that judge it against the reference.

- `numeric` (the default): the answer must be a number, written as an integer, a decimal, a fraction `a/b` or
  `\\frac{a}{b}`, with thousands separators and a `$` allowed; it is compared exactly (2.50 == 5/2).
- `math-verify`: Hugging Face's math-verify parses the answer as LaTeX or an expression and compares it
  symbolically (units and `\\text{}` ignored, 12% == 0.12 only if the reference says so, sets and intervals too).

Which answer counts when a completion writes several is `task.answer_position`: the last (the default, as
GSM8K's and MATH's graders read it) or the first. A completion with no marked answer is badly formatted under
both verifiers, and wrong under `task.extraction: strict` (the default: the task's instruction asks for the
mark, and RL should learn to write it); under `flexible` its last (or first) number is its answer, as
lm-evaluation-harness's flexible-extract reads GSM8K ("... so the answer is 19." answers 19).

    final_answer("7 + 5 = 12\\n#### 12")              # '12'
    math_equal("1/2", "\\\\frac{2}{4}")                 # True
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal, InvalidOperation
from fractions import Fraction

_HASHES = re.compile(r"####\s*([^\n]+)")
_BOXED = re.compile(r"\\boxed\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
MAX_ANSWER_CHARS = 200  # a longer "answer" is no answer; it also bounds what math-verify's parser is given


def marked_answer(text: str, position: str = "last") -> str | None:
    """The text of the last (or first) `#### x` or `\\boxed{x}` of a completion, or None."""
    candidates = [(m.start(), m.group(1)) for m in _HASHES.finditer(text)]
    candidates += [(m.start(), m.group(1)) for m in _BOXED.finditer(text)]
    if not candidates:
        return None
    span = (max if position == "last" else min)(candidates)[1].strip().rstrip(".").strip()  # "#### 12." ends a sentence
    return span if len(span) <= MAX_ANSWER_CHARS else None


_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")


def unmarked_answer(text: str, position: str = "last") -> str | None:
    """The last (or first) number written anywhere in a text, or None (flexible extraction)."""
    numbers = [m.group(0).rstrip(",") for m in _NUMBER.finditer(text)]
    return (numbers[-1] if position == "last" else numbers[0]) if numbers else None


def final_answer(text: str, position: str = "last") -> str | None:
    """The last (or first) marked answer of a text, as a normalised number, or None."""
    span = marked_answer(text, position)
    return None if span is None else normalise_number(span)


def normalise_number(text: str) -> str | None:
    """Canonical exact form: '1,234.0' -> '1234', '2.50' -> '5/2'; 'a/b' and \\frac{a}{b} too."""
    cleaned = text.strip().rstrip(".").replace(",", "").replace("$", "").replace(" ", "")
    frac = re.fullmatch(r"\\d?frac\{(-?\d+)\}\{(-?\d+)\}", cleaned) or re.fullmatch(r"(-?\d+)/(-?\d+)", cleaned)
    try:
        if frac:
            value = Fraction(int(frac.group(1)), int(frac.group(2)))
        else:
            value = Fraction(Decimal(cleaned))
    except (InvalidOperation, ValueError, ZeroDivisionError):
        return None
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def math_equal(reference: str, answer: str) -> bool:
    """Whether math-verify finds `answer` (a marked answer's text) equal to `reference`.

    Its own time limits use SIGALRM, which only the main thread may set: elsewhere (the asynchronous trainer's
    rollout thread) they are off, and the answer's length bound is what keeps sympy's work small."""
    from math_verify import parse, verify

    limit = 5 if threading.current_thread() is threading.main_thread() else None
    gold = parse(f"${reference}$", parsing_timeout=limit)
    given = parse(f"\\boxed{{{answer}}}", parsing_timeout=limit)
    return bool(gold and given and verify(gold, given, timeout_seconds=limit))


class FinalAnswerVerifier:
    """The Task protocol's verifying half for tasks whose completions end with a marked final answer; a task sets
    `verifier` and `answer_position` from its knobs."""

    verifier = "numeric"
    answer_position = "last"
    extraction = "strict"

    def answer_span(self, completion: str) -> str | None:
        """The text of the answer a completion commits to: its marked answer; under flexible extraction, failing
        that, its last (or first) number."""
        span = marked_answer(completion, self.answer_position)
        if span is None and self.extraction == "flexible":
            return unmarked_answer(completion, self.answer_position)
        return span

    def answer_key(self, example, completion: str) -> str | None:
        """The answer a completion commits to, for majority voting: its number, or (math-verify) its text."""
        span = self.answer_span(completion)
        if span is None:
            return None
        number = normalise_number(span)
        return number if number is not None or self.verifier == "numeric" else span

    def is_correct(self, example, completion: str) -> bool:
        if self.verifier == "numeric":
            return self.answer_key(example, completion) == example.answer
        span = self.answer_span(completion)
        return span is not None and math_equal(example.answer, span)

    def format_ok(self, example, completion: str) -> bool:
        """Whether the completion marks its answer as the instruction asks (#### x or \\boxed{x}), either way."""
        span = marked_answer(completion, self.answer_position)
        return span is not None and (self.verifier != "numeric" or normalise_number(span) is not None)
