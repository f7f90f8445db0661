"""A baseline of several launches: a directory of reports, one per launch, and the judgement across them.

Two boots of one configuration differ (about 2.8 % CV of throughput on real GPUs; 14.9 % between two
healthy launches of a 2-worker fleet behind smg, docs/fleet.md), and one launch's own noise (its
repeats, a bootstrap of its requests) knows nothing of the next launch. So ``--sglang-baseline DIR``
reads every ``*.json`` report in ``DIR`` as one launch of the same configuration (recording a launch
is writing one more report there: ``--sglang-report DIR/launch-4.json``). Per metric the launches'
figures give the spread between launches (:class:`.launch_noise.LaunchSpread`), and a candidate is
judged against what a **new launch** of the baseline plausibly gives: the prediction interval of
``candidate / baseline`` from the between-launch variance ``s^2 (1 + 1/k)`` (each launch's mean
already carries its within-launch noise; the within-launch variance is the floor), with Student's t
for the ``k - 1`` degrees of freedom of ``k`` launches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen.measure.intervals import Interval, Side, regressed, regression_interval, z_value
from pytest_sglang.loadgen.measure.launch_noise import (
    LaunchSpread,
    Verdict,
    cannot_judge_launches,
    count_needed,
    launches_needed,
    verdict,
)
from pytest_sglang.report import baseline_file
from pytest_sglang.report.fingerprint import changes, incomparable

_RECORD = "record a launch with --sglang-report {path}/launch-1.json (one report per launch of the same configuration)"


def load_launches(path: str | Path, option: str, figures: frozenset[str]) -> list[tuple[str, dict[str, Any]]]:
    """The reports of a baseline: one file (one launch), or every ``*.json`` of a directory (one launch each).

    A directory with no report, or whose reports are launches of different configurations (another
    model, GPU, host, SGLang version, image, runner or launch args), is refused naming the files.
    """
    where = Path(path)
    if not where.is_dir():
        return [(str(path), baseline_file.load_report(path, option, figures=figures))]
    files = sorted(f for f in where.iterdir() if f.suffix == ".json" and f.is_file())
    if not files:
        others = sorted(f.name for f in where.iterdir())[:3]
        holds = f"it holds {', '.join(others)}{' ...' if len(others) == 3 else ''}, " if others else "it is empty, "
        raise ConfigError(option, str(path), f"the baseline directory holds no JSON report (*.json): {holds}"
                          "a baseline of no launch would compare nothing", _RECORD.format(path=str(path).rstrip("/")))
    launches = [(str(f), baseline_file.load_report(f, option, figures=figures)) for f in files]
    _same_configuration(launches, option, str(path))
    return launches


def _same_configuration(launches: Sequence[tuple[str, dict[str, Any]]], option: str, path: str) -> None:
    first, report = launches[0]
    mine = report.get("fingerprint") or {}
    for other, other_report in launches[1:]:
        theirs = other_report.get("fingerprint") or {}
        differs = [line.replace("(baseline)", f"({Path(first).name})").replace("(this run)", f"({Path(other).name})")
                   for line in incomparable(mine, theirs)] + [c.line() for c in changes(mine, theirs)]
        if differs:
            raise ConfigError(option, path, f"its reports are launches of different configurations: {first} and "
                              f"{other} differ in {'; '.join(differs)}",
                              "keep the launches of one configuration in one baseline directory (move the other "
                              "reports to a directory of their own), or give one report file")


@dataclass(frozen=True)
class Between:
    """A figure judged against a new launch of a baseline of several launches."""

    spread: LaunchSpread
    #: ``candidate / baseline`` and its prediction interval.
    ratio: Interval
    #: The regression in percent (positive = worse) and its prediction interval.
    change: Interval
    confidence: float
    #: Whether the change is beyond the limit and beyond the noise between launches.
    regressed: bool
    #: The prediction interval's half-width, percent (what a change must exceed to count).
    noise_pct: float
    #: Whether the launches' spread (not the within-launch noise) set the interval.
    launch_noise: bool

    def verdict(self, limit_pct: float, within_regressed: bool) -> Verdict:
        """Regressed only when beyond the noise between launches and within the launch; else passed or cannot judge.

        The limit can be judged when the interval's half-width is within it (:func:`.launch_noise.count_needed`
        of the launches given: the half-width shrinks as one over the square root of the launches).
        """
        given = self.spread.launches
        return verdict(self.regressed and within_regressed, count_needed(given, self.noise_pct, limit_pct), given)

    def needed(self, limit_pct: float) -> int:
        """Launches per side that would judge ``limit_pct`` at the measured launch-to-launch CV (power 0.95)."""
        return launches_needed(limit_pct, max(self.spread.cv_pct or 0.0, 1e-9))

    def cannot_judge(self, metric: str, limit_pct: float) -> str:
        return cannot_judge_launches(metric, limit_pct, self.spread, self.needed(limit_pct))

    def interval_text(self) -> str:
        """The prediction interval of the figure's change, as the within-launch interval is shown."""
        r = self.ratio
        return (f"{self.confidence:.1%} prediction interval of the change for a new launch of the baseline "
                f"[{(r.low - 1) * 100:+.1f}%, {(r.high - 1) * 100:+.1f}%] (from the spread of its "
                f"{self.spread.launches} launches: they differ by {self.spread.range_pct:.1f} %, CV "
                f"{self.spread.cv_pct or 0:.1f} %; t with {self.spread.launches - 1} degrees of freedom)")


def between_launches(spread: LaunchSpread, old: Side, new: Side, limit_pct: float, higher_is_better: bool,
                     confidence: float) -> Between:
    """``new`` against a new launch of the baseline whose launches are ``spread`` (``old``: its pooled repeats)."""
    known = [v for v in (old.var, new.var) if v is not None]  # as ratio_interval: an unmeasured side as the other
    within_var = sum(v if v is not None else max(known) for v in (old.var, new.var)) if known else 0.0
    launch_var = spread.prediction_var() or 0.0
    launch_noise = launch_var >= within_var
    var, df = (launch_var, spread.df) if launch_noise else (within_var, None)
    point = new.center / spread.center if spread.center > 0 else math.inf
    half = z_value(confidence, df) * math.sqrt(var)
    ratio = Interval(point, point * math.exp(-half), point * math.exp(half), measured=var > 0)
    change = regression_interval(ratio, higher_is_better)
    noise = max(change.point - change.low, 0.0) if math.isfinite(change.point) else 0.0
    return Between(spread, ratio, change, confidence, regressed(change, limit_pct), noise, launch_noise)
