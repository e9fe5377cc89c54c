"""Flaw detectors: does a completion reach its answer by a malformed derivation? (FAPO's flawed positives)

A detector sees the example and the completion's text and says whether the reasoning that got
there is flawed, whatever the answer. The `flawed-positive` reward (workers/tasks/rewards.py)
asks it only about correct completions. Detectors are pluggable by name
(`reward.flaw_detector`); FAPO's paper uses a generative reward model that localises the
first wrong step, which a detector here may wrap. The built-in one is rule-based and fits the
tiny tasks, whose derivations are arithmetic expressions (countdown) or bare numbers (arith).

    FLAW_DETECTORS.get("malformed-derivation")()(example, "(3)*7+12")   # True: parentheses around one number
"""

from __future__ import annotations

import re
from typing import Protocol

from workers.registry import Registry
from workers.tasks import Example

FLAW_DETECTORS: Registry[type] = Registry("flaw detector")


class FlawDetector(Protocol):
    def __call__(self, example: Example, text: str) -> bool: ...


@FLAW_DETECTORS.register("malformed-derivation")
class MalformedDerivation:
    """A step that does nothing, which the verifier reads past: the answer was reached despite it.

    Flawed: a number written with a leading zero (`07`), a minus applied to a minus (`--3`,
    `-(-3)`), parentheses around a lone number (`(3)`) or around another pair (`((3+4))`).
    Each leaves the value unchanged, so the outcome reward cannot tell it from a clean derivation.
    """

    RULES = {
        "leading zero": re.compile(r"(?<!\d)0\d"),
        "double negation": re.compile(r"-\s*\(?\s*-"),
        "parenthesised number": re.compile(r"\(\s*\d+\s*\)"),
        "doubled parentheses": re.compile(r"\(\s*\((?:[^()]|\([^()]*\))*\)\s*\)"),
    }

    def __call__(self, example: Example, text: str) -> bool:
        return bool(self.flaws(text))

    def flaws(self, text: str) -> list[str]:
        """The names of the rules the text breaks (empty: clean)."""
        return [name for name, rule in self.RULES.items() if rule.search(text)]


__all__ = ["FLAW_DETECTORS", "FlawDetector", "MalformedDerivation"]
