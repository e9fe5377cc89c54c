"""Reward functions: each against values worked out by hand."""

import pytest

from workers.config import resolve
from workers.tasks import Example, build_task
from workers.tasks.rewards import REWARDS, Completion


@pytest.fixture
def setup():
    cfg = resolve({"rollout": {"max_new_tokens": 10}, "reward": {"overlong_buffer": 4}, "eval": {"size": 10}})
    return build_task(cfg), cfg


def reward(name, setup, text, length, truncated=False):
    task, cfg = setup
    return REWARDS.get(name)(task, cfg)(Example("1+2=", "3"), Completion(text, length, truncated))


def test_correct(setup):
    assert reward("correct", setup, "3", 2) == 1.0
    assert reward("correct", setup, "4", 2) == 0.0


def test_format_needs_an_answer_and_an_ending(setup):
    assert reward("format", setup, "4", 2) == 1.0
    assert reward("format", setup, "x", 2) == 0.0
    assert reward("format", setup, "4", 10, truncated=True) == 0.0


def test_length_penalty_is_linear(setup):
    assert reward("length", setup, "3", 5) == -0.5


def test_soft_overlong_penalty_matches_dapo(setup):
    # L = 10, B = 4: free up to 6 tokens, then linear down to -1 at 10, -1 when truncated
    assert reward("overlong", setup, "3", 6) == 0.0
    assert reward("overlong", setup, "3", 7) == pytest.approx(-0.25)
    assert reward("overlong", setup, "3", 10) == pytest.approx(-1.0)
    assert reward("overlong", setup, "3", 10, truncated=True) == -1.0
