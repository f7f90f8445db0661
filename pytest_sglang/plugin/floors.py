"""``--sglang-suggest-floors``: run the throughput markers measure-only and say which floors would hold.

The floors and ceilings a marker gives are not judged (failed requests still are); each test's loads
feed :func:`pytest_sglang.gates.suggest.suggest_floors`. The suggestions are printed at the end of the
run and written as JSON next to ``--sglang-report`` (``<report>.floors.json``), else to
``sglang-suggested-floors.json`` in the directory pytest was started from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang.gates.suggest import DEFAULT_MARGIN, plausible_range, suggest_floors
from pytest_sglang.gates.throughput import FLOORS

if TYPE_CHECKING:
    from pytest_sglang.loadgen import LoadResult
    from pytest_sglang.plugin.settings import Settings

__all__ = ["FLOORS_KEY", "MARKERS", "FloorSuggestions", "measure_only"]

#: The markers whose floors are suggested (their keywords are the throughput gate's FLOORS).
MARKERS = ("sglang_throughput",)
#: Suggested when the marker gives no floor of its own.
DEFAULT_KEYWORDS = ("min_output_tok_s", "max_ttft_ms_p99")
FILE_NAME = "sglang-suggested-floors.json"


def measure_only(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The marker's keywords without its floors and ceilings (the load shape and error rate stay)."""
    return {k: v for k, v in kwargs.items() if k not in FLOORS}


@dataclass
class FloorSuggestions:
    """The suggestions of this run, per test id."""

    margin: float = DEFAULT_MARGIN
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, nodeid: str, marker: str, kwargs: Mapping[str, Any], loads: Sequence[LoadResult]) -> None:
        keywords = [k for k in kwargs if k in FLOORS] or list(DEFAULT_KEYWORDS)
        done = [r for r in loads if r.completed]
        measured = {k: [float(getattr(r, FLOORS[k][0])) for r in done] for k in keywords}
        ranges = {k: list(plausible_range(FLOORS[k][0], v, [r.samples() for r in done]))
                  for k, v in measured.items() if v}
        floors = suggest_floors(ranges, self.margin)
        if floors:
            self.tests[nodeid] = {"marker": marker, "floors": floors, "measured": measured,
                                  "plausible_range": ranges}

    def lines(self) -> list[str]:
        if not self.tests:
            return ["sglang suggested floors: no sglang_throughput load completed a request, nothing to suggest"]
        out = [f"sglang suggested floors (the worst end of each figure's 95% interval, {self.margin:.0%} margin; see "
               "docs/first-run.md):"]
        for nodeid, entry in self.tests.items():
            given = ", ".join(f"{k}={v:g}" for k, v in entry["floors"].items())
            out.append(f"  {nodeid}: @pytest.mark.{entry['marker']}({given}, ...)")
        return out

    def write(self, settings: Settings, invocation_dir: Path) -> Path:
        path = (Path(settings.sglang_report).with_suffix(".floors.json") if settings.sglang_report
                else invocation_dir / FILE_NAME)
        path.parent.mkdir(parents=True, exist_ok=True)
        rule = ("floor = low x (1 - margin), ceiling = high x (1 + margin); low/high: the repeats and their "
                "95% interval (the baselines' statistics)")
        path.write_text(json.dumps({"margin": self.margin, "rule": rule, "tests": self.tests}, indent=2) + "\n")
        return path


FLOORS_KEY = pytest.StashKey[FloorSuggestions]()
