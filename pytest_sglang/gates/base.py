"""Check records shared by every gate, marker, report and baseline.

A gate (capacity, hicache, throughput, SLO, startup, baseline) evaluates to a :class:`GateOutcome`
made of :class:`Check` records. ``assert_*`` helpers raise ``AssertionError(outcome.message())``;
markers evaluate the same function, so both give the same message. Records are plain data
(``to_dict``/``from_dict``) so that they travel from xdist workers to the controller through
``item.user_properties`` and end up in the terminal summary, JSON, Markdown, JUnit and HTML reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_sglang.formatting import Value, fmt


class GateNotApplicable(Exception):
    """The gate cannot run in this setup (e.g. failover on a fleet it did not launch): the test is skipped.

    Not an :class:`~pytest_sglang.errors.SGLangError`: nothing is wrong, the check just does not apply.
    """


class GateCannotJudge(GateNotApplicable):
    """The gate ran and no check failed, but one could not be judged: skipped saying why, never passed.

    A probe that could not have failed in the load's time, for one. Under ``--sglang-strict`` it fails.
    """


def _ge(m: Any, r: Any) -> bool:
    return bool(m >= r)


def _le(m: Any, r: Any) -> bool:
    return bool(m <= r)


def _eq(m: Any, r: Any) -> bool:
    return bool(m == r)


def _in(m: Any, r: Any) -> bool:
    return bool(m in r)


_OPS: dict[str, Callable[[Any, Any], bool]] = {">=": _ge, "<=": _le, "==": _eq, "in": _in}


@dataclass(frozen=True)
class Check:
    """One comparison: ``measured <op> required``, with its unit and where the figure came from."""

    gate: str
    metric: str
    measured: Value
    required: Value
    op: str
    unit: str = ""
    source: str = ""
    passed: bool = False
    #: What moves this figure (flags), shown on failure.
    remedy: str = ""
    #: Extra facts (e.g. the load shape), shown and stored.
    detail: str = ""
    #: The marker/helper keyword that set ``required`` (``min_output_tok_s``), so messages name it.
    keyword: str = ""

    @property
    def written(self) -> str:
        """The keyword as the user wrote it: ``min_output_tok_s=5000`` (empty without a keyword)."""
        return f"{self.keyword}={self.required!r}" if self.keyword else ""

    def describe(self) -> str:
        """One line: name, measured, required and verdict."""
        unit = f" {self.unit}" if self.unit else ""
        verdict = "ok" if self.passed else "FAILED"
        src = f" [{self.source}]" if self.source else ""
        required = f"{self.op} {fmt(self.required)}{unit}"
        measured = f"measured {fmt(self.measured)}{unit}, required {required}{src}: {verdict}"
        return f"{self.written}: {self.metric} {measured}" if self.keyword else f"{self.metric}: {measured}"

    def headline(self) -> str:
        """The failure in a few words: ``min_output_tok_s=5000: measured 930.2 tok/s (output_throughput)``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.keyword:
            return f"{self.written}: measured {fmt(self.measured)}{unit} ({self.metric})"
        return f"{self.metric} {fmt(self.measured)}{unit} (required {self.op} {fmt(self.required)})"

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON-ready data (reports, baselines)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Check:
        """A check read back from :meth:`to_dict` data; unknown keys are ignored."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def compare(gate: str, metric: str, measured: Value, op: str, required: Value, *, unit: str = "", source: str = "",
            remedy: str = "", detail: str = "", keyword: str = "") -> Check:
    """Build a :class:`Check` (the keywords are its fields); a missing measurement (None) never passes."""
    if op not in _OPS:
        raise ValueError(f"unknown comparison {op!r}")
    passed = measured is not None and _OPS[op](measured, required)
    return Check(gate=gate, metric=metric, measured=measured, required=required, op=op, passed=passed, unit=unit,
                 source=source, remedy=remedy, detail=detail, keyword=keyword)


@dataclass
class GateOutcome:
    """The result of one gate: its checks plus context (load shape, sources, server view)."""

    gate: str
    checks: list[Check] = field(default_factory=list)
    #: Free-form facts shown under the checks (load shape, integrity counts, server's own view).
    context: dict[str, Any] = field(default_factory=dict)
    #: Extra lines for the failure message (e.g. "where each number came from").
    notes: list[str] = field(default_factory=list)
    #: What the gate meant to check and could not, one line each with why (a worker's weights whose
    #: /weights_checker did not answer): shown by every report; a failed check under ``strict`` (:meth:`strict`).
    unchecked: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return all(c.passed for c in self.checks)

    def __repr__(self) -> str:
        """One line: the gate, its verdict and the checks that failed (:meth:`message` has everything)."""
        failed = self.failed
        verdict = "passed" if not failed else "FAILED " + ", ".join(c.headline() for c in failed[:3])
        more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
        ok = len(self.checks) - len(failed)
        return f"<GateOutcome {self.gate}: {ok}/{len(self.checks)} checks ok, {verdict}{more}>"

    @property
    def failed(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.checks if not c.passed]

    def add(self, check: Check) -> Check:
        """Append ``check`` and return it."""
        self.checks.append(check)
        return check

    def message(self) -> str:
        """The failure message: headline, every check, context, remedies (the same for assert_* and markers)."""
        failed = self.failed
        head = (f"sglang {self.gate} gate failed: " + "; ".join(c.headline() for c in failed) if failed
                else f"sglang {self.gate} gate passed")
        lines = [head]
        lines += [f"  {c.describe()}" for c in self.checks]
        for key, value in self.context.items():
            if not key.startswith("_"):  # "_" keys are data for the reports (e.g. a soak's series), not text
                lines.append(f"  {key}: {value}")
        lines += [f"  {n}" for n in self.notes]
        lines += [f"  not checked: {u}" for u in self.unchecked]
        remedies = _unique(c.remedy for c in failed if c.remedy)
        if remedies:
            lines.append("Fix: " + "; ".join(remedies))
        return "\n".join(lines)

    def raise_for_failures(self) -> None:
        """Raise ``AssertionError`` with :meth:`message` when a check failed."""
        __tracebackhide__ = True
        if not self.passed:
            raise AssertionError(self.message())

    def strict(self, remedy: str) -> GateOutcome:
        """This outcome with each :attr:`unchecked` line as a failed check too: what could not run fails."""
        failed = [Check(self.gate, "not checked", line, "checked", "==", remedy=remedy) for line in self.unchecked]
        return GateOutcome(self.gate, [*self.checks, *failed], dict(self.context), list(self.notes),
                           list(self.unchecked))

    def to_dict(self) -> dict[str, Any]:
        """The outcome as JSON-ready data (reports, baselines)."""
        data = {"gate": self.gate, "checks": [c.to_dict() for c in self.checks],
                "context": {k: _jsonable(v) for k, v in self.context.items()}, "notes": list(self.notes)}
        return {**data, "unchecked": list(self.unchecked)} if self.unchecked else data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateOutcome:
        """An outcome read back from :meth:`to_dict` data."""
        return cls(gate=data["gate"], checks=[Check.from_dict(c) for c in data.get("checks", [])],
                   context=dict(data.get("context", {})), notes=list(data.get("notes", [])),
                   unchecked=list(data.get("unchecked", [])))


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)
