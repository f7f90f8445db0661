"""A sentence of an EBNF grammar: the simulator's answer under an ``ebnf`` grammar.

The grammar is xgrammar's GBNF dialect (``root ::= "yes" | "no"``): rules, string literals,
character classes, rule references, groups, ``|`` and the quantifiers ``* + ? {m,n}``. The sentence
is a short derivation from ``root`` (first alternative that terminates, fewest repetitions).
Errors carry xgrammar 0.2.7's text for the common mistakes: an empty rule, an undefined rule, no
``root`` rule, an unterminated string.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from pytest_sglang.simulator.model.regex_instance import MAX_LENGTH, GrammarError, regex_instance, xgrammar_error

__all__ = ["ebnf_instance"]

_TOKEN = re.compile(
    r'(?P<ws>\s+|#[^\n]*)|(?P<name>[A-Za-z_][\w-]*)\s*(?P<def>::=)?|(?P<str>"(?:[^"\\\n]|\\.)*")'
    r"|(?P<cls>\[(?:[^\]\\]|\\.)*\])|(?P<op>[()|*+?])|(?P<rep>\{\d+(?:,\d*)?\})"
)
_MAX_DEPTH = 40
_MAX_STEPS = 50_000


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    line: int
    col: int


class _TooDeep(Exception):
    """This alternative does not terminate within the depth budget: try the next one."""


def _parser_error(tok: _Tok | None, end: tuple[int, int], message: str) -> GrammarError:
    line, col = (tok.line, tok.col) if tok else end
    return xgrammar_error("grammar_parser.cc:820", f"EBNF parser error at line {line}, column {col}: {message}")


def _lex(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        col = pos - line_start + 1
        if m is None:
            if text[pos] == '"':
                line_end = text.find("\n", pos)
                end_col = (len(text) if line_end < 0 else line_end) - line_start + 1
                raise xgrammar_error(
                    "grammar_parser.cc:106",
                    f'EBNF lexer error at line {line}, column {end_col}: Expect " in string literal',
                )
            raise _parser_error(_Tok("?", text[pos], line, col), (line, col), f"Expect element, but got {text[pos]}")
        kind = m.lastgroup or "ws"
        if m.group("def"):
            out.append(_Tok("def", m.group("name"), line, col))
        elif kind != "ws":
            out.append(_Tok(kind, m.group(kind), line, col))
        for nl in re.finditer("\n", m.group(0)):
            line, line_start = line + 1, pos + nl.end()
        pos = m.end()
    return out


class _Grammar:
    def __init__(self, text: str) -> None:
        self.toks = _lex(text)
        lines = text.split("\n")
        self.end = (len(lines), len(lines[-1]) + 1)
        self.rules: dict[str, list[_Tok]] = {}
        self.budget = _MAX_DEPTH
        self.steps = 0
        starts = [i for i, t in enumerate(self.toks) if t.kind == "def"] + [len(self.toks)]
        for a, b in itertools.pairwise(starts):
            self.rules[self.toks[a].text] = self.toks[a + 1 : b]
        for body in self.rules.values():
            if not body:
                raise _parser_error(None, self.end, "Expect element, but got ")
            for tok in body:
                if tok.kind == "name" and tok.text not in self.rules:
                    raise _parser_error(tok, self.end, f'Rule "{tok.text}" is not defined')
        if "root" not in self.rules:
            raise _parser_error(_Tok("", "", 1, 1), self.end, 'The root rule with name "root" is not found')

    def sentence(self) -> str:
        # Iterative deepening: the first depth budget that lets ``root`` terminate gives a short
        # sentence even for recursive rules (``root ::= "a" root | "b"`` -> ``b``).
        for budget in (2, 4, 8, 16, _MAX_DEPTH):
            self.budget = budget
            try:
                return self._rule("root", 0)
            except _TooDeep:
                continue
        raise _TooDeep

    def _rule(self, name: str, depth: int) -> str:
        self.steps += 1
        if self.steps > _MAX_STEPS:  # a grammar whose derivations explode: bounded work
            raise GrammarError(f"the simulator expands at most {_MAX_STEPS} rules per grammar")
        if depth > self.budget:
            raise _TooDeep
        text, _ = self._alternation(self.rules[name], 0, depth + 1)
        return text

    def _alternation(self, toks: list[_Tok], i: int, depth: int) -> tuple[str, int]:
        branches: list[tuple[int, int]] = []
        start, level = i, 0
        while i < len(toks) and not (level == 0 and toks[i].text == ")"):
            level += {"(": 1, ")": -1}.get(toks[i].text, 0) if toks[i].kind == "op" else 0
            if level == 0 and toks[i].text == "|":
                branches.append((start, i))
                start = i + 1
            i += 1
        branches.append((start, i))
        for a, b in branches:
            try:
                return self._sequence(toks[a:b], depth), i
            except _TooDeep:
                continue
        raise _TooDeep

    def _sequence(self, toks: list[_Tok], depth: int) -> str:
        out, i = [], 0
        while i < len(toks):
            tok = toks[i]
            if tok.text == "(":
                text, i = self._alternation(toks, i + 1, depth)
            elif tok.kind == "str":
                text = tok.text[1:-1].encode().decode("unicode_escape")
            elif tok.kind == "cls":
                text = regex_instance(tok.text)
            else:
                text = self._rule(tok.text, depth)
            i += 1
            out.append(self._repeat(text, toks[i] if i < len(toks) else None))
            if i < len(toks) and toks[i].kind in ("op", "rep") and toks[i].text not in "()|":
                i += 1
        return "".join(out)

    @staticmethod
    def _repeat(text: str, quant: _Tok | None) -> str:
        if quant is None or quant.kind not in ("op", "rep") or quant.text in "()|":
            return text
        if quant.text in ("*", "?"):
            return ""  # fewest repetitions: zero
        if quant.kind == "rep":
            count = int(quant.text[1:-1].split(",")[0])
            if len(text) * count > MAX_LENGTH:
                raise GrammarError(f"the simulator writes at most {MAX_LENGTH} characters for a grammar")
            return text * count
        return text


def ebnf_instance(grammar: str) -> str:
    """A sentence of ``grammar`` (raises :class:`GrammarError` with xgrammar's text when it is invalid)."""
    g = _Grammar(grammar)
    try:
        return g.sentence()
    except _TooDeep:
        raise _parser_error(None, g.end, "The grammar has no finite sentence") from None
