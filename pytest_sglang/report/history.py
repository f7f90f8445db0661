"""A history of runs: JSON reports read into time-ordered runs, their figures and their configurations.

Each report is one run (a nightly job's ``--sglang-report``). Runs are ordered by the time the report
was written (``generated_at``), whatever order the files come in, and named by the label the user
gave (``--sglang-run-label``: a commit or a version), else by that time. A figure of a run is keyed
by test, load shape (or gate) and metric: a load's figure is the median of its repeats, as the
baseline comparison uses them, and a load with failed requests gives no figure (its throughput is
not a measurement). A change of configuration (model, GPU, host, runner, launch args) splits the
history into segments: a new configuration is not a regression, so change points are searched
within one configuration only. The SGLang version and image are what a nightly run tracks, so a
change of those does not split the history; it is shown next to a change point instead.
"""

from __future__ import annotations

import datetime as _dt
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_sglang.errors import ConfigError
from pytest_sglang.report.baseline import CAPACITY_METRICS, Limits, gate_figures, load_report
from pytest_sglang.report.fingerprint import COMPARABLE, changes
from pytest_sglang.report.records import shape_key

#: Fingerprint fields whose change starts a new configuration (a segment of the history).
CONFIG_FIELDS = (*COMPARABLE, "runner", "launch_args")
#: Fingerprint fields a nightly run tracks: shown where they change, never a new configuration.
VERSION_FIELDS = ("sglang_version", "image")

#: (test nodeid, load shape or "<gate> gate", metric).
SeriesKey = tuple[str, str, str]


def key_text(key: SeriesKey) -> str:
    return f"{key[0]} [{key[1]}] {key[2]}"


@dataclass(frozen=True)
class Run:
    """One report: when it was written, its label, its fingerprint and its figures."""

    path: str
    time: _dt.datetime
    label: str | None
    fingerprint: Mapping[str, Any]
    figures: Mapping[SeriesKey, float]
    #: Series whose load had failed requests in this run: no figure.
    failed: frozenset[SeriesKey] = field(default_factory=frozenset)

    @property
    def name(self) -> str:
        """The label the run was given, else the time its report was written."""
        return self.label or self.time.strftime("%Y-%m-%d %H:%M")

    @property
    def config(self) -> dict[str, Any]:
        return {f: self.fingerprint.get(f) for f in CONFIG_FIELDS}


@dataclass(frozen=True)
class Segment:
    """Consecutive runs of one configuration; ``changed`` says what changed at its first run (empty: the first)."""

    runs: Sequence[Run]
    changed: Sequence[str] = ()


def report_paths(given: Sequence[str], option: str = "REPORTS") -> list[str]:
    """The files named, a directory standing for its ``*.json`` files; an empty directory is an error."""
    paths: list[str] = []
    for item in given:
        if Path(item).is_dir():
            found = sorted(str(p) for p in Path(item).glob("*.json"))
            if not found:
                raise ConfigError(option, item, "is a directory with no *.json file in it",
                                  "give the JSON reports of the runs (written with --sglang-report), or their folder")
            paths += found
        else:
            paths.append(item)
    return paths


def read_run(path: str, metrics: Sequence[str], option: str = "REPORTS") -> Run:
    """One report as a run; an unreadable or foreign file is a :class:`ConfigError` naming it."""
    report = load_report(path, option)
    written = report.get("generated_at")
    try:
        time = _dt.datetime.fromisoformat(str(written))
    except ValueError:
        raise ConfigError(option, path, f"has no readable generated_at ({written!r}), so it cannot be placed in "
                          "time", "give the reports as pytest-sglang wrote them (--sglang-report)") from None
    if time.tzinfo is None:
        time = time.replace(tzinfo=_dt.timezone.utc)
    label = report.get("run_label")
    figures, failed = _figures(report.get("tests", []), metrics)
    return Run(path, time, str(label) if label else None, dict(report.get("fingerprint") or {}), figures,
               frozenset(failed))


def in_order(runs: Sequence[Run]) -> list[Run]:
    """Oldest first; runs written at the same second in the order of their file names."""
    return sorted(runs, key=lambda r: (r.time, r.path))


def segments(runs: Sequence[Run]) -> list[Segment]:
    """The ordered runs cut where the configuration changes."""
    found: list[Segment] = []
    start = 0
    for i in range(1, len(runs) + 1):
        if i == len(runs) or runs[i].config != runs[i - 1].config:
            changed = config_changes(runs[start - 1], runs[start]) if start else []
            found.append(Segment(runs[start:i], changed))
            start = i
    return found


def config_changes(before: Run, after: Run) -> list[str]:
    """``gpu_model: H100 -> A100``, ``launch_args: --tp 1 -> --tp 2``: what configuration changed between two runs."""
    old, new = before.fingerprint, after.fingerprint
    lines = [f"{f}: {old.get(f)} -> {new.get(f)}" for f in COMPARABLE if old.get(f) != new.get(f)]
    return lines + [c.line() for c in changes(old, new) if c.field in CONFIG_FIELDS]


def version_changes(before: Run, after: Run) -> list[str]:
    """``sglang_version: 0.5.23 -> 0.5.24``: what a run tracks that changed between two runs."""
    old, new = before.fingerprint, after.fingerprint
    return [f"{f}: {old.get(f)} -> {new.get(f)}" for f in VERSION_FIELDS if old.get(f) != new.get(f)]


def _figures(tests: Sequence[Mapping[str, Any]], metrics: Sequence[str]
             ) -> tuple[dict[SeriesKey, float], set[SeriesKey]]:
    figures: dict[SeriesKey, float] = {}
    failed: set[SeriesKey] = set()
    capacity = Limits({m: 0.0 for m in metrics if m in CAPACITY_METRICS})
    for test in tests:
        nodeid = str(test.get("nodeid", ""))
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for load in test.get("loads", []):
            groups.setdefault(shape_key(load), []).append(load)
        for shape, loads in groups.items():
            bad = any((_num(ld.get("failed")) or 0) > 0 for ld in loads)
            for metric in metrics:
                values = [v for v in (_num(ld.get(metric)) for ld in loads) if v is not None]
                if not values:
                    continue
                if bad:
                    failed.add((nodeid, shape, metric))
                else:
                    figures[nodeid, shape, metric] = statistics.median(values)
        for (gate, metric), (value, _unit) in gate_figures(test.get("gates", []), capacity).items():
            figures[nodeid, f"{gate} gate", metric] = float(value)
    return figures, failed


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
