"""The acceptance suite's checks as gate records: one :class:`Check` per correctness check run.

A correctness check (:mod:`pytest_sglang.correctness`) lists problems; the reports list checks. Each
check run becomes ``acceptance <check name>: <problems> == 0``, with its distinct findings as detail
and its figures as context, so the suite shows in the terminal summary, JSON, JUnit, Markdown and HTML
like any gate.
"""

from __future__ import annotations

from pytest_sglang.correctness.result import MAX_SHOWN, CheckReport
from pytest_sglang.gates.base import GateOutcome, compare

GATE = "acceptance"
#: The detail kept per record (the full message is the test's failure).
_DETAIL_CHARS = 600


def acceptance_outcome(report: CheckReport) -> GateOutcome:
    """``report`` as a gate outcome: its problem count against 0, its findings once each."""
    findings = report.findings()
    detail = "; ".join(f.line() for f in findings[:MAX_SHOWN])
    if len(findings) > MAX_SHOWN:
        detail += f"; ... and {len(findings) - MAX_SHOWN} more"
    check = compare(GATE, report.name, len(report.problems), "==", 0, unit="problems", source="acceptance suite",
                    detail=detail[:_DETAIL_CHARS])
    return GateOutcome(GATE, [check], context={k: v for k, v in report.figures.items()})
