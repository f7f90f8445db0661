"""Change points of one series of figures, found by Apache Otava (E-divisive means, as MongoDB's CI uses).

Otava is an optional extra (``pip install 'pytest-sglang[trend]'``): it brings numpy and scipy, which
nothing else here needs. It is imported when a series is analysed, never at import time. Otava's own
defaults are kept (a window of 50 runs, a p-value below 0.001): measured on generated nightly series
with the 3 % launch-to-launch noise of real GPUs, they find a 10 % step and stay quiet on flat noise
(``benchmarks/bench_trend.py``, docs/reports.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_sglang.errors import ConfigError

#: Otava's defaults (otava.series.AnalysisOptions).
MAX_PVALUE = 0.001
WINDOW = 50
#: Fewer runs than this are not analysed: with 3 % noise the library finds a 10 % step in a series
#: of 6 runs less than 1 time in 5 (and a series of 3 identical-then-different values always).
MIN_RUNS = 6
INSTALL = "pip install 'pytest-sglang[trend]'"


@dataclass(frozen=True)
class Shift:
    """One change point: from run ``index`` on, the series moved from ``before`` to ``after`` (means)."""

    index: int
    before: float
    after: float
    pvalue: float

    @property
    def change_pct(self) -> float:
        """``after`` against ``before`` in percent (+ is up, whatever the metric)."""
        return (self.after / self.before - 1.0) * 100.0 if self.before else 0.0

    @property
    def rising(self) -> bool:
        """The series went up (told from the means: a change from 0 has no percentage)."""
        return self.after > self.before

    @property
    def confidence(self) -> float:
        """1 - p: the probability, by Otava's t-test of the two sides, that the shift is not noise."""
        return 1.0 - self.pvalue


def available() -> bool:
    return importlib.util.find_spec("otava") is not None


def require(what: str) -> None:
    """Raise :class:`ConfigError` naming ``what`` needs it when Otava is not installed."""
    if not available():
        raise ConfigError(what, "apache-otava", "finds change points with Apache Otava, which is not installed",
                          f"{INSTALL} (Python 3.10 to 3.14)")


def shifts(values: Sequence[float], *, max_pvalue: float = MAX_PVALUE, min_change_pct: float = 0.0,
           window: int = WINDOW) -> list[Shift]:
    """The change points of ``values`` (in run order), first to last; [] for fewer than :data:`MIN_RUNS`."""
    if len(values) < MIN_RUNS:
        return []
    require("trend")
    from otava.analysis import compute_change_points

    found, _weak = compute_change_points(list(values), window_len=window, max_pvalue=max_pvalue,
                                         min_magnitude=min_change_pct / 100.0)
    return [Shift(int(cp.index), float(cp.stats.mean_1), float(cp.stats.mean_2), float(cp.stats.pvalue))
            for cp in found]
