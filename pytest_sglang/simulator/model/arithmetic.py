"""The simulated model's arithmetic: it answers "What is 17 + 25?" questions correctly.

An accuracy gate needs a server that gets answers right (and one that gets them wrong, through the
``wrong-answer`` fault). The question searched for is the *last* one in the prompt, so few-shot
prompts (worked examples first, the open question last) work like on a real model. Supported:
integers, ``+ - * /`` (also ``x``, ``×``, ``÷`` and the words plus, minus, times, divided by) and
parentheses. The answer ends with ``#### N`` like GSM8K's solutions, and ``N`` is also the last number
in the text, so both SGLang's harness extraction (last number) and ``####`` extraction find it.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["Question", "last_question", "solution"]

_WORDS = (
    (re.compile(r"\bmultiplied by\b|\btimes\b|×|(?<=\d)\s*x\s*(?=\d)"), " * "),
    (re.compile(r"\bdivided by\b|÷"), " / "),
    (re.compile(r"\bplus\b"), " + "),
    (re.compile(r"\bminus\b"), " - "),
)
_QUESTION = re.compile(
    r"(?:what is|what's|compute|calculate|evaluate)\s+([-+*/×÷x()\d\s.,a-z]{1,200}?)(?:\?|=|$)",
    re.IGNORECASE | re.MULTILINE,
)
_TOKEN = re.compile(r"\s*(\d+|[-+*/()])")
#: Numbers and operators only (after word substitution): guards the evaluator against prose.
_EXPR = re.compile(r"^[\d\s+\-*/()]+$")


class Question:
    """One arithmetic question found in a prompt: its expression text and exact value."""

    __slots__ = ("expression", "value")

    def __init__(self, expression: str, value: Fraction) -> None:
        self.expression = expression
        self.value = value


def _normalise(text: str) -> str:
    out = text.lower().replace(",", "")
    for pattern, op in _WORDS:
        out = pattern.sub(op, out)
    return " ".join(out.split())


class _Parser:
    """Recursive descent over ``+ - * / ( )`` and integers (no ``eval``: prompts are untrusted)."""

    def __init__(self, text: str) -> None:
        self.tokens = [m.group(1) for m in _TOKEN.finditer(text)]
        self.pos = 0

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self) -> str:
        tok = self._peek()
        if tok is None:
            raise ValueError("unexpected end of expression")
        self.pos += 1
        return tok

    def parse(self) -> Fraction:
        value = self._sum()
        if self._peek() is not None:
            raise ValueError(f"unexpected {self._peek()!r}")
        return value

    def _sum(self) -> Fraction:
        value = self._product()
        while self._peek() in ("+", "-"):
            op = self._take()
            rhs = self._product()
            value = value + rhs if op == "+" else value - rhs
        return value

    def _product(self) -> Fraction:
        value = self._atom()
        while self._peek() in ("*", "/"):
            op = self._take()
            rhs = self._atom()
            if op == "/" and rhs == 0:
                raise ValueError("division by zero")
            value = value * rhs if op == "*" else value / rhs
        return value

    def _atom(self) -> Fraction:
        tok = self._take()
        if tok == "(":
            value = self._sum()
            if self._take() != ")":
                raise ValueError("unbalanced parenthesis")
            return value
        if tok == "-":
            return -self._atom()
        if not tok.isdigit() or len(tok) > 18:  # bounded work on hostile prompts
            raise ValueError(f"not a number: {tok!r}")
        return Fraction(int(tok))


def last_question(prompt: str) -> Question | None:
    """The last arithmetic question in ``prompt`` (few-shot: the open one comes last), or None."""
    for match in reversed(list(_QUESTION.finditer(prompt[-4000:]))):
        expression = _normalise(match.group(1)).strip(" .")
        if not expression or not _EXPR.match(expression) or not any(c.isdigit() for c in expression):
            continue
        try:
            return Question(expression, _Parser(expression).parse())
        except ValueError:
            continue
    return None


def format_number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.2f}".rstrip("0").rstrip(".")


def solution(question: Question, value: Fraction | None = None) -> str:
    """The worked answer, ending with ``#### N`` (``value`` overrides the right one: wrong answers)."""
    shown = format_number(question.value if value is None else value)
    return f"{question.expression} = {shown}.\n#### {shown}"
