"""How figures are shown in every message and report: one formatter for the engine, the gates and the reports."""

from __future__ import annotations

import math

__all__ = ["Value", "fmt"]

#: A figure a check compares or a report shows.
Value = float | int | str | bool | None


def fmt(value: Value) -> str:
    """Human formatting: thousands separators for ints, 4 significant digits for floats."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4g}"
    return str(value)
