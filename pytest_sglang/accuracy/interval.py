"""Binomial confidence intervals for an accuracy score (Wilson score interval, and Newcombe's for a drop).

A score of 0.74 on 200 questions is 0.74 +- 0.06 at 95 %: a floor judged on the bare number fails a
good server about as often as it should fail a bad one. The Wilson interval (Wilson 1927) keeps its
coverage near the nominal level for small ``n`` and scores near 0 or 1, where the normal
approximation ("p +- z*sqrt(p(1-p)/n)") collapses to a zero-width interval.
"""

from __future__ import annotations

import math
from statistics import NormalDist

DEFAULT_CONFIDENCE = 0.95


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``n`` (``(0, 1)`` when ``n`` is 0)."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Exact at the edges: 0 successes cannot have a lower bound above 0 (float error says 1e-17).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def difference(new: tuple[int, int], old: tuple[int, int],
               confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float, float]:
    """``new - old`` in score, with Newcombe's hybrid score interval (method 10, built from Wilson's).

    ``new`` and ``old`` are ``(successes, n)``. Returns ``(difference, low, high)``.
    """
    (s1, n1), (s2, n2) = new, old
    p1, p2 = s1 / n1 if n1 else 0.0, s2 / n2 if n2 else 0.0
    l1, u1 = wilson(s1, n1, confidence)
    l2, u2 = wilson(s2, n2, confidence)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
