"""A small exact parser for integer arithmetic: + - * / and parentheses.

Verifiers must never `eval` model output. This recursive-descent parser reads
only numbers, the four operators and parentheses, computes with exact
fractions, and reports which numbers the expression used.

    parse("3*(7+12)") -> Parsed(value=Fraction(57), numbers=[3, 7, 12])
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")
MAX_LENGTH = 200  # longer text is not an answer to any task here; refuse before parsing


class ParseError(ValueError):
    pass


@dataclass(frozen=True)
class Parsed:
    value: Fraction
    numbers: list[int]


def tokenize(text: str) -> list[str]:
    tokens = []
    for number, other in _TOKEN.findall(text.strip()):
        if number:
            tokens.append(number)
        elif other in "+-*/()":
            tokens.append(other)
        elif not other.isspace():
            raise ParseError(f"unexpected character {other!r}")
    return tokens


def parse(text: str) -> Parsed:
    if len(text) > MAX_LENGTH:
        raise ParseError("expression too long")
    parser = _Parser(tokenize(text))
    value = parser.expression()
    if parser.pos != len(parser.tokens):
        raise ParseError(f"unexpected {parser.tokens[parser.pos]!r}")
    return Parsed(value, parser.numbers)


class _Parser:
    """expression := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ;
    factor := '-' factor | number | '(' expression ')'"""

    def __init__(self, tokens: list[str]):
        self.tokens, self.pos, self.numbers, self.depth = tokens, 0, [], 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ParseError("unexpected end")
        self.pos += 1
        return token

    def expression(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self) -> Fraction:
        value = self.factor()
        while self.peek() in ("*", "/"):
            op, rhs = self.take(), self.factor()
            if op == "*":
                value *= rhs
            elif rhs == 0:
                raise ParseError("division by zero")
            else:
                value /= rhs
        return value

    def factor(self) -> Fraction:
        token = self.take()
        if token == "-":
            return -self.factor()
        if token == "(":
            self.depth += 1
            if self.depth > 20:
                raise ParseError("too deeply nested")
            value = self.expression()
            if self.take() != ")":
                raise ParseError("missing ')'")
            self.depth -= 1
            return value
        if token.isdigit():
            self.numbers.append(int(token))
            return Fraction(int(token))
        raise ParseError(f"unexpected {token!r}")
