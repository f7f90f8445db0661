"""Trends over a history of runs: the change points of every figure, and which of them are new.

A series is one figure (test, load shape or gate, metric) over the runs of one configuration
(:mod:`.history`). Its change points come from Apache Otava (:mod:`.changepoint`); each says from
which run the figure moved, by how much, and with what confidence. A change point is **new** when the
history without its last ``new_runs`` runs does not show it (none in the same direction within
:data:`SAME_WITHIN` runs): a nightly CI step fails on the night a change point first appears, not on
every night after. A change point with fewer than ``confirm`` runs at its new level is *pending*: one
outlying last run is shown, not failed on. Only a change point that makes a metric worse fails; an
improvement is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_sglang.report.baseline import higher_is_better
from pytest_sglang.report.changepoint import MAX_PVALUE, MIN_RUNS, Shift, shifts
from pytest_sglang.report.history import Run, Segment, SeriesKey, segments

#: A change point this close (in runs) to one found before is the same change point.
SAME_WITHIN = 2
#: Runs at the new level a change point needs before it can fail a night: one run off by 3.3 noise
#: sigmas (10 % at a CV of 3 %) is a change point of its own at the end of a history, gone the next night.
CONFIRM = 2

#: Exit codes of ``python -m pytest_sglang trend`` (docs/reports.md).
OK, NEW_REGRESSION, BAD_INPUT, TOO_SHORT = 0, 1, 2, 3


@dataclass(frozen=True)
class Finding:
    """One change point of one series: ``run`` is the first run at the new level, ``previous`` the one before."""

    key: SeriesKey
    run: Run
    previous: Run
    shift: Shift
    new: bool
    #: Fewer than ``confirm`` runs at the new level yet: shown, judged once enough runs follow.
    pending: bool = False
    confirm: int = 0

    @property
    def worse(self) -> bool:
        return self.shift.rising != higher_is_better(self.key[2])


@dataclass
class Trend:
    """What the history shows: change points, series without one, series too short to judge."""

    runs: Sequence[Run]
    segments: Sequence[Segment]
    findings: list[Finding] = field(default_factory=list)
    #: Series judged, with or without a change point.
    judged: int = 0
    #: Series of fewer than MIN_RUNS runs: (key, runs, segment index).
    short: list[tuple[SeriesKey, int, int]] = field(default_factory=list)
    #: Runs left out of a series because their load had failed requests: (key, run names).
    failed: list[tuple[SeriesKey, list[str]]] = field(default_factory=list)

    @property
    def new_regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.new and f.worse]

    @property
    def exit_code(self) -> int:
        if self.new_regressions:
            return NEW_REGRESSION
        return TOO_SHORT if not self.judged else OK


def analyse(runs: Sequence[Run], *, max_pvalue: float = MAX_PVALUE, min_change_pct: float = 0.0,
            new_runs: int = 1, confirm: int = CONFIRM) -> Trend:
    """The change points of every series in ``runs`` (oldest first), within each configuration."""
    parts = segments(runs)
    trend = Trend(runs, parts)
    for number, part in enumerate(parts):
        latest = number == len(parts) - 1
        for key in _keys(part.runs):
            _series(trend, key, part.runs, number, max_pvalue, min_change_pct, new_runs if latest else 0, confirm)
    return trend


def _keys(runs: Sequence[Run]) -> list[SeriesKey]:
    keys: dict[SeriesKey, None] = {}
    for run in runs:
        keys.update(dict.fromkeys(run.figures))
        keys.update(dict.fromkeys(run.failed))
    return list(keys)


def _series(trend: Trend, key: SeriesKey, runs: Sequence[Run], segment: int, max_pvalue: float,
            min_change_pct: float, new_runs: int, confirm: int) -> None:
    """Judge one series; ``new_runs`` is 0 for an older configuration (it gained no run, nothing in it is new)."""
    have = [r for r in runs if key in r.figures]
    failed = [r.name for r in runs if key in r.failed]
    if failed:
        trend.failed.append((key, failed))
    if len(have) < MIN_RUNS:
        trend.short.append((key, len(have), segment))
        return
    trend.judged += 1
    values = [r.figures[key] for r in have]
    found = shifts(values, max_pvalue=max_pvalue, min_change_pct=min_change_pct)
    # The history as it was before the newest runs (of every series, not of this one's figures).
    newest = {id(r) for r in runs[max(0, len(runs) - new_runs):]} if new_runs else set()
    before = [r for r in have if id(r) not in newest]
    earlier = shifts([r.figures[key] for r in before], max_pvalue=max_pvalue, min_change_pct=min_change_pct) \
        if new_runs and len(before) < len(have) else found
    earlier = [s for s in earlier if len(before) - s.index >= confirm]
    for shift in found:
        pending = len(have) - shift.index < confirm
        new = not pending and not any(abs(old.index - shift.index) <= SAME_WITHIN
                                      and old.rising == shift.rising for old in earlier)
        trend.findings.append(Finding(key, have[shift.index], have[shift.index - 1], shift, new, pending, confirm))
