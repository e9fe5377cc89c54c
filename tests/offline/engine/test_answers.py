"""Final answers in the forms completions write them, judged by both verifiers (workers/tasks/answers.py)."""

from __future__ import annotations

import threading

import pytest

from workers.tasks import Example
from workers.tasks.answers import FinalAnswerVerifier


def verifier(kind: str, position: str = "last") -> FinalAnswerVerifier:
    judge = FinalAnswerVerifier()
    judge.verifier, judge.answer_position = kind, position
    return judge


# (reference, completion, numeric's verdict, math-verify's verdict)
FORMS = [
    ("12", "7 + 5 = 12\n#### 12", True, True),
    ("12", "#### 12.", True, True),  # a sentence's full stop
    ("12", "The answer is \\boxed{12}.", True, True),
    ("5/2", "#### 2.5", True, True),  # a decimal and a fraction
    ("5/2", "#### 5/2", True, True),
    ("5/2", "\\boxed{\\frac{5}{2}}", True, True),
    ("5/2", "\\boxed{\\dfrac{10}{4}}", True, True),
    ("1234", "#### 1,234", True, True),  # thousands separators
    ("1234", "\\boxed{1,234}", True, True),
    ("12", "#### $12", True, True),  # a currency sign
    ("12", "\\boxed{12 \\text{ apples}}", False, True),  # a unit
    ("12", "#### 12 apples", False, True),
    ("12", "\\boxed{x = 12}", False, True),  # an equation that names the value
    ("12", "#### 13", False, False),
    ("12", "I think it is 12.", False, False),  # no marked answer: wrong under both
    ("12", "#### 12\n#### 13", False, False),  # several answers: the last counts
    ("12", "\\boxed{13} no wait, \\boxed{12}", True, True),
    ("-3", "#### -3", True, True),
]


@pytest.mark.parametrize(("reference", "completion", "numeric", "symbolic"), FORMS)
def test_each_answer_form_is_judged_as_its_verifier_should(reference, completion, numeric, symbolic):
    example = Example(prompt="?", answer=reference)
    assert verifier("numeric").is_correct(example, completion) is numeric
    assert verifier("math-verify").is_correct(example, completion) is symbolic


def test_the_first_marked_answer_counts_when_the_task_says_so():
    example = Example(prompt="?", answer="12")
    for kind in ("numeric", "math-verify"):
        assert verifier(kind, "first").is_correct(example, "#### 12\n#### 13")
        assert not verifier(kind, "first").is_correct(example, "#### 13\n#### 12")


def test_a_completion_without_a_marked_answer_is_badly_formatted_and_votes_for_nothing():
    example = Example(prompt="?", answer="12")
    for kind in ("numeric", "math-verify"):
        assert not verifier(kind).format_ok(example, "twelve")
        assert verifier(kind).answer_key(example, "twelve") is None
    assert verifier("numeric").answer_key(example, "#### 24/2") == "12"
    assert verifier("math-verify").answer_key(example, "\\boxed{\\sqrt{2}}") == "\\sqrt{2}"  # voted as written


def test_math_verify_judges_off_the_main_thread_too():
    # the asynchronous trainer scores on its rollout thread, where SIGALRM time limits cannot be set
    verdicts = []
    thread = threading.Thread(target=lambda: verdicts.append(verifier("math-verify").is_correct(
        Example(prompt="?", answer="5/2"), "\\boxed{\\frac{10}{4}}")))  # fmt: skip
    thread.start()
    thread.join(30)
    assert verdicts == [True]


def test_an_answer_longer_than_the_bound_is_no_answer():
    example = Example(prompt="?", answer="1")
    assert not verifier("math-verify").format_ok(example, "#### " + "1+" * 150 + "1")


# flexible extraction (lm-evaluation-harness's flexible-extract): (reference, completion, verdict, format_ok)
FLEXIBLE = [
    ("19", "15 + 4 = 19. The answer is 19.", True, False),  # no mark: the last number
    ("19", "15 + 4 = 19, and he has 2 left.", False, False),  # a number after the answer is the answer read
    ("1234", "So she has 1,234 coins.", True, False),  # thousands separators
    ("5/2", "Each gets 2.5 apples.", True, False),
    ("19", "#### 19\nThen 2 more.", True, True),  # a mark is read first, wherever it is
    ("19", "I cannot tell.", False, False),
]


@pytest.mark.parametrize(("reference", "completion", "verdict", "marked"), FLEXIBLE)
def test_flexible_extraction_reads_an_unmarked_completions_last_number(reference, completion, verdict, marked):
    example = Example(prompt="?", answer=reference)
    for kind in ("numeric", "math-verify"):
        flexible, strict = verifier(kind), verifier(kind)
        flexible.extraction = "flexible"
        assert flexible.is_correct(example, completion) is verdict, kind
        assert flexible.format_ok(example, completion) is marked  # the format reward still asks for the mark
        assert strict.is_correct(example, completion) is (verdict and marked)


def test_flexible_extraction_with_the_first_position_reads_the_first_number():
    judge = verifier("numeric", "first")
    judge.extraction = "flexible"
    assert judge.is_correct(Example(prompt="?", answer="19"), "19 stickers, since 15 + 4 is that")
    assert not judge.is_correct(Example(prompt="?", answer="19"), "15 + 4 = 19")
