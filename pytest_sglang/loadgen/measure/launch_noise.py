"""Noise between launches, the launches a limit needs, and the three verdicts (plain Python, no I/O).

A promotion compares launches: production was launched once, the candidate again. Two boots of one
configuration differ (about 2.8 % CV of throughput on real GPUs, 0.2 % within one boot), so a verdict
that knows only the noise within one launch goes red at random. This module is the one place that says:

- **the launches (or repeats, or requests) a limit needs**: :func:`launches_needed` (a power
  calculation: per side, for an effect at a coefficient of variation, one-sided ``alpha``, ``power``)
  and :func:`count_needed` (a measured interval's half-width scaled to the limit: the half-width
  shrinks as one over the square root of the count);
- **the verdict**: :func:`verdict` gives :data:`PASSED`, :data:`REGRESSED` or :data:`CANNOT_JUDGE`.
  A change counts only when it is beyond the limit and beyond the noise; a limit the noise given
  cannot judge is "cannot judge", neither a quiet pass nor a red;
- **the spread of launches** (:class:`LaunchSpread`) and the lines a report shows
  (:func:`cannot_judge_launches`, :func:`cannot_judge_within`, :func:`one_launch_note`).

Student's t quantiles live here too (:func:`t_quantile`): few launches estimate their spread loosely.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Final, Literal

Verdict = Literal["passed", "regressed", "cannot judge"]
PASSED: Final = "passed"
REGRESSED: Final = "regressed"
CANNOT_JUDGE: Final = "cannot judge"
VERDICTS: Final[tuple[Verdict, ...]] = (PASSED, REGRESSED, CANNOT_JUDGE)
#: One-sided false-alarm rate and power of :func:`launches_needed` (Datadog flags at 90 % confidence;
#: a gate that fails a promotion should be surer).
ALPHA: Final = 0.01
POWER: Final = 0.95


def _t_within(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` degrees of freedom (Abramowitz & Stegun 26.7.3-4: exact sums)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)), ending at cos^(df-3)
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    term, total = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), ending at cos^(df-2)
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def two_sided(confidence: float, df: int | None = None) -> float:
    """The multiplier of a two-sided interval: Student's t for a spread from ``df`` degrees of freedom, else normal."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence!r} is not between 0 and 1")
    if df is None or df < 1 or df > 1000:
        return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    low, high = 0.0, 1.0
    while _t_within(high, df) < confidence:
        high *= 2
    for _ in range(100):  # bisection: P(|T| < t) grows with t
        mid = (low + high) / 2
        low, high = (mid, high) if _t_within(mid, df) < confidence else (low, mid)
    return high


def t_quantile(p: float, df: int | None = None) -> float:
    """The ``p`` quantile (``p`` > 0.5) of Student's t with ``df`` degrees of freedom (None: the normal)."""
    if not 0.5 < p < 1:
        raise ValueError(f"quantile {p!r} is not between 0.5 and 1")
    return two_sided(2 * p - 1, df)


def launches_needed(effect_pct: float, cv_pct: float, *, alpha: float = ALPHA, power: float = POWER,
                    df: int | None = None) -> int:
    """Launches per side that detect a change of ``effect_pct`` at ``cv_pct`` launch-to-launch noise.

    Two samples of n launches, one-sided test at ``alpha`` with ``power``:
    ``n = 2 ((q(1 - alpha) + q(power)) cv / effect)^2`` (the normal approximation). ``df``: the degrees
    of freedom of the measured ``cv`` (launches - 1); its t quantiles widen ``n`` for a CV that few
    launches measured loosely. For a 10 % change at 3 % CV, alpha 0.01 and power 0.95: 3 per side.
    At least 1; a zero CV needs 1.
    """
    if not effect_pct > 0 or not math.isfinite(effect_pct):
        raise ValueError(f"effect {effect_pct!r} % is not a positive number")
    if not cv_pct >= 0 or not math.isfinite(cv_pct):
        raise ValueError(f"coefficient of variation {cv_pct!r} % is not a number >= 0")
    if not 0 < alpha < 0.5 or not 0.5 < power < 1:
        raise ValueError(f"alpha {alpha!r} must be in (0, 0.5) and power {power!r} in (0.5, 1)")
    q = t_quantile(1 - alpha, df) + t_quantile(power, df)
    return max(1, math.ceil(2 * (q * cv_pct / effect_pct) ** 2 - 1e-9))


def count_needed(given: int, noise_pct: float, limit_pct: float) -> int:
    """The count (requests, repeats, launches) whose interval's half-width would be ``limit_pct``.

    ``noise_pct`` is the half-width measured with ``given``; it shrinks as one over the square root of
    the count. ``given`` itself when the noise is within the limit.
    """
    given = max(given, 1)
    if limit_pct <= 0 or noise_pct <= limit_pct:
        return given
    return math.ceil(given * (noise_pct / limit_pct) ** 2)


def judgeable(needed: int, given: int) -> bool:
    """Whether ``given`` launches (repeats, requests) can judge the limit that needs ``needed``: the one rule."""
    return given >= needed


def verdict(regressed: bool, needed: int, given: int) -> Verdict:
    """The verdict of a change: :data:`REGRESSED` when it is beyond the limit and the noise (``regressed``).

    Otherwise :data:`CANNOT_JUDGE` when the noise needs more than was ``given`` (:func:`judgeable`),
    else :data:`PASSED`. A regression beyond the noise is one whatever the counts: it was detected.
    """
    if regressed:
        return REGRESSED
    return PASSED if judgeable(needed, given) else CANNOT_JUDGE


@dataclass(frozen=True)
class LaunchSpread:
    """One figure of a baseline over its launches: each launch's value (the geometric mean of its repeats)."""

    values: tuple[float, ...]

    @property
    def launches(self) -> int:
        return len(self.values)

    @property
    def _logs(self) -> list[float]:
        return [math.log(max(v, 1e-12)) for v in self.values]

    @property
    def center(self) -> float:
        """The geometric mean over the launches."""
        return math.exp(statistics.fmean(self._logs))

    @property
    def log_var(self) -> float | None:
        """The sample variance of the launches' log figures (None: one launch knows no spread)."""
        return statistics.variance(self._logs) if self.launches >= 2 else None

    @property
    def cv_pct(self) -> float | None:
        """The launch-to-launch coefficient of variation, percent (log-normal: ``sqrt(exp(var) - 1)``)."""
        var = self.log_var
        return None if var is None else math.sqrt(math.expm1(var)) * 100

    @property
    def range_pct(self) -> float:
        """How far apart the launches are: largest over smallest, minus one, percent."""
        low = min(self.values)
        return (max(self.values) / low - 1) * 100 if low > 0 else math.inf

    @property
    def df(self) -> int | None:
        """Degrees of freedom of the spread (launches - 1; None for one launch)."""
        return self.launches - 1 if self.launches >= 2 else None

    def prediction_var(self) -> float | None:
        """Log variance of a new launch against this baseline's mean: ``var (1 + 1/k)`` (None: one launch).

        A launch's mean already carries its own within-launch noise, so the launches' spread holds both.
        """
        var = self.log_var
        return None if var is None else var * (1 + 1 / self.launches)


def needed_for(spread: LaunchSpread, limit_pct: float, *, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Launches per side a ``limit_pct`` change needs at this baseline's measured CV (None: one launch)."""
    cv = spread.cv_pct
    return None if cv is None else launches_needed(limit_pct, cv, alpha=alpha, power=power)


def cannot_judge_launches(metric: str, limit_pct: float, spread: LaunchSpread, needed: int, *,
                          power: float = POWER, alpha: float = ALPHA) -> str:
    """The "cannot judge" line of a figure whose launches are too far apart for the launches given."""
    return (f"cannot judge a {limit_pct:g} % change of {metric}: healthy launches differ by {spread.range_pct:.1f} % "
            f"(CV {spread.cv_pct or 0:.1f} % over the baseline's {spread.launches} launches); about {needed} "
            f"launches per side would (power {power:g}, one-sided {alpha:.0%}): record more with --sglang-report "
            f"into the baseline directory")


def cannot_judge_within(metric: str, limit_pct: float, noise_pct: float, requests: int, repeats: int) -> str:
    """The "cannot judge" line of a figure whose noise within the launch exceeds the limit (:func:`count_needed`)."""
    return (f"cannot judge a {limit_pct:g} % change of {metric} from this load: its noise is ±{noise_pct:.1f} %, so "
            f"only a change beyond {noise_pct:.1f} % fails; about {count_needed(requests, noise_pct, limit_pct)} "
            f"requests= or {count_needed(repeats, noise_pct, limit_pct)} repeats= would")


def one_launch_note(path: str, *, more: int = 2) -> str:
    """The line every report shows for a baseline of one launch: the between-launch noise is unknown."""
    return (f"baseline of 1 launch: {path} cannot know the noise between launches (two boots of one configuration "
            f"differ; only this launch's own noise is judged); record {more} more with --sglang-report into a "
            "baseline directory and give --sglang-baseline that directory")

