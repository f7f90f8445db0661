"""What a correctness check returns: the problems it saw, its figures, and how it fails.

A check never stops at the first problem: a promotion gate is more useful when it lists everything
wrong with the server at once. :meth:`CheckReport.raise_if_failed` turns the list into one
:class:`CheckFailed` (an ``AssertionError``: a threshold miss is a test FAILURE, not an ERROR).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Problems shown in a failure message; the rest are counted ("... and 12 more").
MAX_SHOWN = 8
Figure = float | int | str


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

    def message(self) -> str:
        head = f"{self.name}: {len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"
        lines = [head, *(f"  - {p}" for p in self.problems[:MAX_SHOWN])]
        if len(self.problems) > MAX_SHOWN:
            lines.append(f"  ... and {len(self.problems) - MAX_SHOWN} more")
        if self.figures:
            lines.append("  measured: " + ", ".join(f"{k}={_fmt(v)}" for k, v in self.figures.items()))
        return "\n".join(lines)

    def raise_if_failed(self) -> CheckReport:
        if self.problems:
            raise CheckFailed(self)
        return self


def _fmt(value: Figure) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def excerpt(text: object, limit: int = 160) -> str:
    """``text`` as a short repr for a message (long model outputs are cut in the middle)."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[: limit // 2]}...{shown[-limit // 2 :]}"
