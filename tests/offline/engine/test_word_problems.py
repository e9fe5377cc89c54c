"""The word-problems task: stories with worked solutions whose arithmetic holds, a held-out split that no
retelling leaks into training, and the GSM8K answer format."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.configs import small_config
from workers.errors import ConfigError
from workers.tasks import build_task
from workers.tasks.stories import NAMES, THINGS


def task_of(**knobs):
    return build_task(small_config(task={"name": "word-problems", **knobs}, eval={"size": 100}))


def problem(prompt: str) -> str:
    """A story with its names and things blanked out: what makes it the same problem however it is retold."""
    return re.sub(r"\b(" + "|".join(NAMES + THINGS) + r")\b", "_", prompt)


def test_every_worked_solution_is_right_and_every_count_stays_within_the_range():
    task = task_of(steps=4, operations="+-*/", max_number=30, distractors=2)
    rng = np.random.default_rng(1)
    for _ in range(300):
        drawn = task.draw(rng)
        *lines, final = drawn.solution.splitlines()
        assert 1 <= len(lines) <= 4 and final == f"#### {drawn.example.answer}"
        for line in lines:
            a, op, b, _, result = line.split()
            assert {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b), "/": int(a) / int(b)}[op] == int(
                result
            )
            assert 1 <= int(result) <= 30
        assert task.is_correct(drawn.example, drawn.solution)
        assert drawn.example.prompt.endswith("?") and drawn.example.prompt.isascii()


def test_no_held_out_problem_reaches_training_even_retold_with_other_names():
    task = task_of(steps=2, max_number=8, distractors=0)  # a small space: training draws often hit held-out ones
    held_out = {problem(e.prompt) for e in task._held_out_examples}
    training = task.train_batch(5000, np.random.default_rng(0))
    retold = {problem(e.prompt) for e in training}
    assert len(retold) > 500 and not retold & held_out
    assert task.eval_examples() == task_of(steps=2, max_number=8, distractors=0).eval_examples()  # a fixed split


def test_the_answer_is_read_after_hashes_or_in_a_box_and_the_last_one_counts():
    task = task_of()
    example = task.eval_examples()[0]
    right = example.answer
    assert task.is_correct(example, f"Step one...\n#### {right}")
    assert task.is_correct(example, f"so the answer is \\boxed{{{right}}}")
    assert not task.is_correct(example, f"#### {right}\n#### {int(right) + 1}")
    assert not task.format_ok(example, f"I think it is {right}.")


def test_a_chat_model_is_asked_to_answer_after_hashes():
    assert task_of().instruction.endswith("give the final answer after ####.")


@pytest.mark.parametrize(
    ("knobs", "field", "why"),
    [
        ({"operations": "+*"}, "task.operations", "must hold + and -"),
        ({"min_steps": 3, "steps": 2}, "task.min_steps", "is above task.steps"),
        ({"digits": 2}, "task.digits", "task 'word-problems' has no knob digits"),
    ],
)
def test_bad_knobs_are_refused_naming_the_field(knobs, field, why):
    with pytest.raises(ConfigError) as err:
        small_config(task={"name": "word-problems", **knobs})
    assert why in err.value.fields[field]
