"""``--sglang-suggest-floors``: run the throughput markers measure-only and say which floors would hold.

The floors and ceilings a marker gives are not judged (failed requests still are); each test's loads
feed :func:`pytest_sglang.gates.suggest.suggest_floors` where the test runs (an xdist worker too), with
the margin of ``--sglang-suggest-floors-margin``, and the suggestion travels in the test's
``user_properties`` to the controller, which gathers them (:class:`FloorSuggestions`). They are
printed at the end of the run and written as JSON next to ``--sglang-report``
(``<report>.floors.json``), else to ``sglang-suggested-floors.json`` in the directory pytest was
started from (:func:`.paths.floors_path`, checked writable at configure time). A write that fails at
the end names the path and fails the run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang.gates.load.throughput import FLOORS
from pytest_sglang.gates.suggest import plausible_range, suggest_floors

if TYPE_CHECKING:
    from pytest_sglang.loadgen import LoadResult

__all__ = ["FLOORS_KEY", "FLOORS_PROP", "MARKERS", "FloorSuggestions", "measure_only", "suggestion"]

#: The markers whose floors are suggested (their keywords are the throughput gate's FLOORS).
MARKERS = ("sglang_throughput",)
#: Suggested when the marker gives no floor of its own.
DEFAULT_KEYWORDS = ("min_output_tok_s", "max_ttft_ms_p99")
#: The ``user_properties`` name of one test's suggestion (JSON), read back on the controller.
FLOORS_PROP = "sglang_floors"
RULE = ("floor = low x (1 - margin), ceiling = high x (1 + margin); low/high: the repeats and their "
        "95% interval (the baselines' statistics)")


def measure_only(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The marker's keywords without its floors and ceilings (the load shape and error rate stay)."""
    return {k: v for k, v in kwargs.items() if k not in FLOORS}


def suggestion(marker: str, kwargs: Mapping[str, Any], loads: Sequence[LoadResult], margin: float
               ) -> dict[str, Any] | None:
    """One test's suggested floors from its loads, or None when no load completed a request."""
    keywords = [k for k in kwargs if k in FLOORS] or list(DEFAULT_KEYWORDS)
    done = [r for r in loads if r.completed]
    measured = {k: [float(getattr(r, FLOORS[k][0])) for r in done] for k in keywords}
    ranges = {k: list(plausible_range(FLOORS[k][0], v, [r.samples() for r in done]))
              for k, v in measured.items() if v}
    floors = suggest_floors(ranges, margin)
    if not floors:
        return None
    return {"marker": marker, "floors": floors, "measured": measured, "plausible_range": ranges}


@dataclass
class FloorSuggestions:
    """The suggestions of this run, per test id: a plugin on the controller (or a run without xdist)."""

    margin: float
    #: Where the JSON goes (:func:`.paths.floors_path`).
    target: Path
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    written: Path | None = None
    #: Why the JSON could not be written (the run then fails), naming the path.
    failure: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == FLOORS_PROP and isinstance(value, str):
                self.tests[report.nodeid] = json.loads(value)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.tests:
            return
        try:
            self.written = self.write()
        except OSError as exc:  # checked writable at configure time; a full disk or a deleted folder since
            self.failure = (f"sglang: could not write the suggested floors to {self.target}: "
                            f"{exc.strerror or type(exc).__name__}")
            if session.exitstatus == pytest.ExitCode.OK:  # a green run whose output is missing is not green
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def lines(self) -> list[str]:
        if not self.tests:
            return ["sglang suggested floors: no sglang_throughput load completed a request, nothing to suggest"]
        out = [f"sglang suggested floors (the worst end of each figure's 95% interval, {self.margin * 100:g}% "
               "margin; see docs/first-run.md):"]
        for nodeid, entry in self.tests.items():
            given = ", ".join(f"{k}={v:g}" for k, v in entry["floors"].items())
            out.append(f"  {nodeid}: @pytest.mark.{entry['marker']}({given}, ...)")
        return out

    def write(self) -> Path:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        doc = {"margin": self.margin, "rule": RULE, "tests": self.tests}
        self.target.write_text(json.dumps(doc, indent=2) + "\n")
        return self.target


FLOORS_KEY = pytest.StashKey[FloorSuggestions]()
