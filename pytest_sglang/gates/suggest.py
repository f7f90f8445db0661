"""Suggested floors: the limits a measured load would have met, with a stated margin.

``--sglang-suggest-floors`` runs the load markers measure-only and prints these. Each figure is first
widened to the range a re-run plausibly gives, with the statistics the baselines use
(:mod:`pytest_sglang.loadgen.measure.intervals`: the repeats' spread and a bootstrap of the per-request
samples, 95 %): :func:`plausible_range`. The margin is then taken against the worst end of that range:
a floor at ``low x (1 - margin)``, a ceiling at ``high x (1 + margin)``. The default margin, 50 %,
covers what one run cannot measure: drift between this run and the next (another machine load,
another day); ``--sglang-suggest-floors-margin`` sets it (10-20 % suits dedicated GPUs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_sglang.defaults import SUGGESTED_FLOORS_MARGIN
from pytest_sglang.loadgen.measure.intervals import Samples, figure_interval, side

__all__ = ["DEFAULT_MARGIN", "plausible_range", "suggest_floors"]

DEFAULT_MARGIN = SUGGESTED_FLOORS_MARGIN


def plausible_range(metric: str, figures: Sequence[float], samples: Sequence[Samples]) -> tuple[float, float]:
    """The lowest and highest ``metric`` a re-run plausibly gives: the repeats and their 95 % interval."""
    interval = figure_interval(side(metric, figures, list(samples)))
    return min(min(figures), interval.low), max(max(figures), interval.high)


def suggest_floors(measured: Mapping[str, Sequence[float]], margin: float = DEFAULT_MARGIN) -> dict[str, float]:
    """``{keyword: limit}`` for ``{keyword: figures measured}``; ``min_*`` keywords are floors, ``max_*`` ceilings.

    >>> suggest_floors({"min_output_tok_s": [1000.0, 900.0], "max_ttft_ms_p99": [40.0, 50.0]})
    {'min_output_tok_s': 450.0, 'max_ttft_ms_p99': 75.0}
    """
    if not 0 <= margin < 1:
        raise ValueError(f"margin={margin!r}: must be a fraction in [0, 1)")
    out: dict[str, float] = {}
    for keyword, values in measured.items():
        if not values:
            continue
        if keyword.startswith("min_"):
            out[keyword] = _round(min(values) * (1 - margin))
        elif keyword.startswith("max_"):
            out[keyword] = _round(max(values) * (1 + margin))
        else:
            raise ValueError(f"{keyword!r}: a suggested limit needs a min_ or max_ keyword")
    return out


def _round(value: float) -> float:
    """Three significant figures (the margin is far wider than the rounding)."""
    return float(f"{value:.3g}")
