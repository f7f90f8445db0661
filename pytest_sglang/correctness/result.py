"""What a correctness check returns: the problems it saw, its figures, and how it fails.

A check never stops at the first problem: a promotion gate is more useful when it lists everything
wrong with the server at once. :meth:`CheckReport.raise_if_failed` turns the list into one
:class:`CheckFailed` (an ``AssertionError``: a threshold miss is a test FAILURE, not an ERROR).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Findings shown in a failure message; the rest are counted ("... and 12 more").
MAX_SHOWN = 8
Figure = float | int | str
#: Where a problem was seen ("prompt 3: ", "request 5: "): the same finding on 8 prompts is one line.
_WHERE = re.compile(r"^(prompt|request) (\d+): ")


class CheckFailed(AssertionError):
    """A correctness check saw the server answer wrongly (the message says what it saw)."""

    def __init__(self, report: CheckReport) -> None:
        self.report = report
        super().__init__(report.message())


class Unsupported(Exception):  # a reason to skip, not an error of the check (no Error suffix)
    """The server does not offer what the check needs (no tool-call parser, no /metrics, ...)."""


@dataclass
class CheckReport:
    """The outcome of one check: ``problems`` (empty = passed) and ``figures`` (what it measured)."""

    name: str
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def expect(self, condition: bool, problem: str) -> bool:
        """Record ``problem`` unless ``condition`` holds; returns ``condition``."""
        if not condition:
            self.problems.append(problem)
        return condition

    def findings(self) -> list[Finding]:
        """The problems with each distinct finding once, and where (which prompts) it was seen."""
        found: dict[str, Finding] = {}
        for problem in self.problems:
            where = _WHERE.match(problem)
            text = problem[where.end():] if where else problem
            finding = found.setdefault(text, Finding(text, where.group(1) if where else ""))
            finding.count += 1
            if where:
                finding.places.append(int(where.group(2)))
        return list(found.values())

    def message(self) -> str:
        findings = self.findings()
        head = f"{self.name}: {_count(len(self.problems), 'problem')}"
        if len(findings) != len(self.problems):
            head += f" ({_count(len(findings), 'distinct finding')})"
        lines = [head, *(f"  - {f.line()}" for f in findings[:MAX_SHOWN])]
        if len(findings) > MAX_SHOWN:
            lines.append(f"  ... and {len(findings) - MAX_SHOWN} more")
        if self.figures:
            lines.append("  measured: " + ", ".join(f"{k}={_fmt(v)}" for k, v in self.figures.items()))
        return "\n".join(lines)

    def raise_if_failed(self) -> CheckReport:
        if self.problems:
            raise CheckFailed(self)
        return self


@dataclass
class Finding:
    """One distinct problem: its text, how often it was seen, and on which prompts or requests."""

    text: str
    kind: str = ""  # "prompt" | "request" | "" (not tied to one)
    count: int = 0
    places: list[int] = field(default_factory=list)

    def line(self) -> str:
        """``finish_reason is "" (x8: prompts 0-7)``; a finding seen once keeps its place in front."""
        if self.count == 1:
            return f"{self.kind} {self.places[0]}: {self.text}" if self.places else self.text
        where = f": {self.kind}s {_ranges(self.places)}" if self.places else ""
        return f"{self.text} (x{self.count}{where})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _ranges(numbers: list[int]) -> str:
    """``0-7, 9``: the places a finding was seen, consecutive runs folded."""
    parts: list[str] = []
    for n in sorted(set(numbers)):
        if parts and n == int(parts[-1].rsplit("-", 1)[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ", ".join(parts)


def _fmt(value: Figure) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def excerpt(text: object, limit: int = 160) -> str:
    """``text`` as a short repr for a message (long model outputs are cut in the middle)."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[: limit // 2]}...{shown[-limit // 2 :]}"
