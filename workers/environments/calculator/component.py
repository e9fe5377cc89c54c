"""The calculator's code: a bounded, exact evaluator of arithmetic and the episode around it."""

from __future__ import annotations

import ast
import re
from fractions import Fraction

import numpy as np

from workers.environments.base import Turn, last_call
from workers.tasks import Example

CALL = re.compile(r"<calc>(.*?)</calc>", re.DOTALL)
OPEN = "<calc>"
LIMIT = 10**15  # a value past this is an error, not a number of a thousand digits
OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
             ast.Div: lambda a, b: a / b}  # fmt: skip
SPELLINGS = {"×": "*", "÷": "/", "−": "-"}  # what a model trained on prose writes for * / -


class CalculatorError(ValueError):
    """An expression the calculator does not evaluate: the policy reads the message as the tool's answer."""


class Calculator:
    stop_strings = ("</calc>",)

    def __init__(self, knobs, task):
        self.max_turns, self.max_episode_tokens = knobs.max_turns, knobs.max_episode_tokens
        self.max_chars, self.task = knobs.max_expression_chars, task
        self.demonstrated_calls = knobs.demonstrated_calls

    def reset(self, example: Example, rng: np.random.Generator) -> CalculatorEpisode:
        return CalculatorEpisode(self, example)

    def demonstrations(self, pairs: list[tuple[str, str]], rng: np.random.Generator) -> list[tuple[str, str]]:
        """The tiny model's warm-up pairs, a share of them written as episodes: an arithmetic question ("12*7+5=")
        computed with a call, its result, then the answer. A question the calculator does not compute to its
        answer is left as it is."""
        shown = []
        for prompt, answer in pairs:
            expression = prompt.strip().removesuffix("=")
            if rng.random() < self.demonstrated_calls and self.computes(expression, answer):
                answer = f"<calc>{expression}</calc><result>{answer}</result>{answer}"  # the result is the answer
            shown.append((prompt, answer))
        return shown

    def computes(self, expression: str, answer: str) -> bool:
        try:
            return written(evaluate(expression, self.max_chars)) == answer
        except CalculatorError:
            return False


class CalculatorEpisode:
    start_state = ""

    def __init__(self, environment: Calculator, example: Example):
        self.environment, self.example = environment, example
        self.opening = example.prompt
        self.turns, self.results = 0, []

    def step(self, turn: str) -> Turn:
        self.turns += 1
        last = self.turns >= self.environment.max_turns
        call = last_call(turn, CALL)
        if call is None:  # no closed call: the answer
            well_formed = OPEN not in turn
            solved = well_formed and self.environment.task.is_correct(self.example, turn)
            return Turn("", float(solved), True, self.state(), well_formed, solved)
        try:
            value, well_formed = written(evaluate(call, self.environment.max_chars)), True
        except CalculatorError as error:
            value, well_formed = f"error: {error}", False
        self.results.append(value)
        return Turn("" if last else f"<result>{value}</result>", 0.0, last, self.state(), well_formed, action=call)

    def state(self) -> str:
        return "|".join(self.results)


def evaluate(expression: str, max_chars: int) -> Fraction:
    """The exact value of + - * / over numbers and parentheses; CalculatorError names what is wrong otherwise."""
    for spelled, operator in SPELLINGS.items():
        expression = expression.replace(spelled, operator)
    expression = re.sub(r"(?<=\d),(?=\d{3}\b)", "", expression.strip())  # 1,000 -> 1000
    if not expression:
        raise CalculatorError("empty expression")
    if len(expression) > max_chars:
        raise CalculatorError(f"expression longer than {max_chars} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise CalculatorError(f"cannot read '{expression}'") from None
    return value_of(tree.body)


def value_of(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return bounded(Fraction(str(node.value)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = value_of(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = value_of(node.left), value_of(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise CalculatorError("division by zero")
        return bounded(OPERATORS[type(node.op)](left, right))
    raise CalculatorError("only numbers, + - * / and parentheses")


def bounded(value: Fraction) -> Fraction:
    if abs(value) > LIMIT:
        raise CalculatorError("a value past 10^15")
    return value


def written(value: Fraction) -> str:
    """An integer as it is; any other value as a decimal of at most 6 places, trailing zeros dropped."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.6f}".rstrip("0").rstrip(".")
