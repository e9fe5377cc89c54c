"""FAPO: a correct completion reached by a malformed derivation earns less, by a pluggable flaw detector."""

import pytest

from tests.offline.engine.test_gdpo import estimate, with_parts
from workers.config import ConfigError, resolve
from workers.tasks import TASKS, Example
from workers.tasks.flaws import FLAW_DETECTORS
from workers.tasks.rewards import Completion, build_rewards

COUNTDOWN = {"task": {"name": "countdown", "digits": 2, "operands": 3}}
EXAMPLE = Example(prompt="3 7 12->33:", answer="33", numbers=(3, 7, 12))


@pytest.mark.parametrize(
    "text, rules",
    [
        ("3*7+12", []),
        ("(3*7)+12", []),  # a pair that groups something is a derivation step, not a flaw
        ("(3)*7+12", ["parenthesised number"]),
        ("((3*7))+12", ["doubled parentheses"]),
        ("3*7- -12", ["double negation"]),
        ("3*7-(-12)", ["double negation"]),
        ("03*7+12", ["leading zero"]),
        ("3*7+10", []),  # wrong, but not malformed: the reward asks about correct ones only
        ("07", ["leading zero"]),  # arith: a bare answer with a leading zero
        ("70", []),
    ],
)
def test_the_detector_names_each_rule_a_derivation_breaks(text, rules):
    assert FLAW_DETECTORS.get("malformed-derivation")().flaws(text) == rules


def rewards_of(texts: list[str]) -> dict[str, list[float]]:
    cfg = resolve({"method": "fapo", **COUNTDOWN})
    functions = build_rewards(TASKS.get("countdown")(cfg), cfg)
    done = [Completion(text, length=len(text), truncated=False) for text in texts]
    return {name: [fn(EXAMPLE, c) for c in done] for name, (_, fn) in functions.items()}


def test_only_a_correct_completion_with_a_flawed_derivation_is_penalised():
    parts = rewards_of(["3*7+12", "(3)*7+12", "(3)*7+10", "12+7*3"])
    assert parts["correct"] == [1.0, 1.0, 0.0, 1.0]
    assert parts["flawed-positive"] == [0.0, -1.0, 0.0, 0.0]  # a flawed wrong answer is already wrong


@pytest.mark.parametrize("correct, flawed, wrong", [(1, 1, 2), (1, 2, 3), (2, 1, 1), (3, 1, 0), (1, 1, 1)])
def test_a_flawed_positive_helps_while_wrong_answers_outnumber_right_ones_and_is_penalised_after(
    correct, flawed, wrong
):
    """With the preset's weights (1, 0.5) GRPO's advantage of a flawed positive has the sign of wrong - correct."""
    weights = resolve({"method": "fapo"}).reward.weights
    parts = {
        "correct": [1.0] * (correct + flawed) + [0.0] * wrong,
        "flawed-positive": [0.0] * correct + [-1.0] * flawed + [0.0] * wrong,
    }
    batch = with_parts([correct + flawed + wrong], parts, weights=weights)
    advantage = float(estimate("group-mean", batch, weights=weights).advantages[correct])  # the first flawed one
    expected = (wrong > correct) - (wrong < correct)
    assert (advantage > 1e-6) - (advantage < -1e-6) == expected


def test_an_unknown_flaw_detector_is_refused_naming_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown flaw detector 'genrm'; valid: malformed-derivation"):
        resolve({"method": "fapo", "reward": {"flaw_detector": "genrm"}})
