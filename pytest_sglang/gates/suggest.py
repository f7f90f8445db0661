"""Suggested floors: the limits a measured load would have met, with a stated margin (plain figures in, out).

``--sglang-suggest-floors`` runs the load markers measure-only and prints these. The margin is taken
against the worst figure measured (the lowest throughput of the repeats, the highest latency): a floor
at ``worst x (1 - margin)``, a ceiling at ``worst x (1 + margin)``. The default margin, 50 %, is wide
because one short load on a shared machine varies by tens of percent between runs; repeats (the
marker's ``repeats=``) show the spread. The shared baseline statistics will replace this rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["DEFAULT_MARGIN", "suggest_floors"]

DEFAULT_MARGIN = 0.5


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
