r"""A string matching a regular expression: the simulator's answer under a ``regex`` grammar.

The subset real prompts use: literals, ``.``, escapes (``\d \w \s`` ...), classes ``[a-z]`` and
``[^...]``, groups ``(...)`` / ``(?:...)``, alternation, and the quantifiers ``* + ? {m} {m,} {m,n}``.
Malformed patterns raise :class:`GrammarError` with the text xgrammar 0.2.7 (SGLang 0.5.23's
default backend) gives, so clients see the same 400.
"""

from __future__ import annotations

import time

__all__ = ["GrammarError", "regex_instance"]

_ESCAPES = {"d": "4", "w": "a", "s": " ", "D": "a", "W": "!", "S": "a", "n": "\n", "t": "\t", "r": "\r"}
_ANCHORS = frozenset("bBAzZ")
_PRINTABLE = "a0 A_-.!"
#: The longest instance the simulator writes (nested repetitions could otherwise grow exponentially).
MAX_LENGTH = 100_000
#: Escapes that stand for a set inside ``[...]`` (what a negated class must avoid).
_CLASS_ESCAPES: dict[str, tuple[tuple[str, str], ...]] = {
    "d": (("0", "9"),),
    "w": (("a", "z"), ("A", "Z"), ("0", "9"), ("_", "_")),
    "s": ((" ", " "), ("\t", "\r")),
}


class GrammarError(ValueError):
    """A grammar the backend cannot compile; ``str()`` is xgrammar's message."""


def xgrammar_error(source: str, message: str) -> GrammarError:
    # xgrammar prefixes its C++ log line: "[HH:MM:SS] /project/cpp/<file>:<line>: ..."
    return GrammarError(f"[{time.strftime('%H:%M:%S')}] /project/cpp/{source}: {message}\n")


class _Regex:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def _error(self, position: int, message: str) -> GrammarError:
        return xgrammar_error("regex_converter.cc:83", f"Regex parsing error at position {position}: {message}")

    def _peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self) -> str:
        text = self._alternation()
        if self._peek() == ")":
            raise self._error(self.i + 1, "Unmatched ')'")
        return text

    def _alternation(self) -> str:
        first = self._sequence()
        while self._peek() == "|":
            self.i += 1
            self._sequence()  # parsed for errors; the model takes the first branch
        return first

    def _sequence(self) -> str:
        out: list[str] = []
        while (ch := self._peek()) is not None and ch not in "|)":
            if ch in "*+?" and not out:
                # xgrammar hands the pattern to its EBNF parser, which reports the stray modifier
                raise xgrammar_error(
                    "grammar_parser.cc:820",
                    f"EBNF parser error at line 1, column {10 + self.i}: Expect element, but got {ch}",
                )
            atom = self._atom()
            out.append(self._quantified(atom))
        return "".join(out)

    def _quantified(self, atom: str) -> str:
        ch = self._peek()
        if ch is None or ch not in "*+?{":
            return atom
        if ch == "{":
            low, high = self._braces()
            count = low if low > 0 else min(1, high if high is not None else 1)
        else:
            self.i += 1
            count = 1  # include optional / repeated parts once: a richer output that still matches
        if self._peek() == "?":
            self.i += 1  # lazy modifier
        if (nxt := self._peek()) is not None and nxt in "*+{":
            raise self._error(self.i + 1, "Two consecutive repetition modifiers are not allowed.")
        if len(atom) * count > MAX_LENGTH:
            raise GrammarError(f"the simulator writes at most {MAX_LENGTH} characters for a grammar")
        return atom * count

    def _braces(self) -> tuple[int, int | None]:
        end = self.p.find("}", self.i)
        if end < 0:
            raise self._error(len(self.p) + 1, "Invalid repetition count.")
        body, start = self.p[self.i + 1 : end], self.i
        low_text, comma, high_text = body.partition(",")
        if not low_text.isdigit() or (high_text and not high_text.isdigit()):
            raise self._error(start + 2, "Invalid repetition count.")
        low, high = int(low_text), (int(high_text) if high_text else None if comma else int(low_text))
        if high is not None and low > high:
            raise xgrammar_error(
                "grammar_parser.cc:820",
                f"EBNF parser error at line 1, column {11 + end}: "
                f"Lower bound is larger than upper bound: {low} > {high}",
            )
        self.i = end + 1
        return low, high

    def _atom(self) -> str:
        ch = self.p[self.i]
        self.i += 1
        if ch == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            text = self._alternation()
            if self._peek() != ")":
                raise self._error(len(self.p) + 1, "The parenthesis is not closed.")
            self.i += 1
            return text
        if ch == "[":
            return self._class()
        if ch == "\\":
            return self._escape()
        if ch in "^$":
            return ""
        return "a" if ch == "." else ch

    def _escape(self) -> str:
        if self.i >= len(self.p):
            raise self._error(len(self.p), "Escape sequence is not finished.")
        ch = self.p[self.i]
        self.i += 1
        return "" if ch in _ANCHORS else _ESCAPES.get(ch, ch)

    def _class(self) -> str:
        negated = self._peek() == "^"
        self.i += negated
        ranges: list[tuple[str, str]] = []
        first = True
        while self._peek() is not None and (self._peek() != "]" or first):
            first = False
            item = self._class_item()
            if len(item) == 1 and self._peek() == "-" and self.i + 1 < len(self.p) and self.p[self.i + 1] != "]":
                self.i += 1
                item = [(item[0][0], self._class_item()[0][1])]
            ranges += item
        if self._peek() != "]":
            raise self._error(len(self.p) + 1, "Unclosed '['")
        self.i += 1
        if not negated:
            return ranges[0][0] if ranges else ""
        return next(c for c in _PRINTABLE + "~" if not any(lo <= c <= hi for lo, hi in ranges))

    def _class_item(self) -> list[tuple[str, str]]:
        ch = self.p[self.i]
        self.i += 1
        if ch != "\\":
            return [(ch, ch)]
        if self.i >= len(self.p):
            raise self._error(len(self.p), "Escape sequence is not finished.")
        ch = self.p[self.i]
        self.i += 1
        if ch in _CLASS_ESCAPES:
            return list(_CLASS_ESCAPES[ch])
        one = _ESCAPES.get(ch, ch)
        return [(one, one)]


def regex_instance(pattern: str) -> str:
    """A string that ``re.fullmatch(pattern, s)`` accepts (first alternatives, one repetition)."""
    return _Regex(pattern).parse()
