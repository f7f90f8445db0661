# Over 600 lines: one comparison (limits, noise, launches, gate figures); BaselineContext calls its private helpers.
"""Baselines: compare this run's figures with a previous JSON report, per test.

Two kinds of figures are compared, with the same limits (``--sglang-max-regression``):
load metrics (bench_serving names, per load shape, median of repeats) and the numeric figures
of the test's capacity/hicache gate records (e.g. ``max_total_num_tokens``: a smaller KV pool
than the baseline's is a regression even when it still meets the marker's floor).
A load metric is judged with the noise measured in the same runs (:mod:`..loadgen.intervals`): the
per-request samples each load stores (bootstrap) and the spread of repeated runs of one shape give a
95% interval of the change, and a metric **regressed when the change is beyond the allowed
regression and beyond the noise** (the interval excludes "no change"), or, with 3 or more repeats
a side, when every repeat regressed so against every baseline repeat. A percentile from too few
requests (a p99 of fewer than 100) is not compared,
with a line saying so. A regression fails **the test that measured the metric** (the plugin calls
:func:`baseline_outcome` in that test's call phase), with both values, the interval and the limit in
the message. Loads with failed requests are never compared: their throughput is not a measurement.

Comparing a candidate configuration with the production baseline is the promotion use: a baseline
whose launch args, SGLang version or image differ is compared, and the failure message says what
the candidate changed (``candidate vs baseline: launch_args: ... -> ...``). A baseline measured on
another setup (model, GPU, host: :data:`.fingerprint.COMPARABLE`) or with another workload (the
test's load shapes) is not compared: a warning, or a failure with ``--sglang-baseline-strict``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypedDict

from pytest_sglang.errors import ConfigError
from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.load.shares import worker_shares
from pytest_sglang.gates.load.throughput import FLOORS
from pytest_sglang.loadgen import LoadResult
from pytest_sglang.loadgen.measure.intervals import (
    CONFIDENCE,
    Samples,
    Side,
    every_pair_regressed,
    ratio_interval,
    regressed,
    regression_interval,
    reliable,
    repeat_sides,
    side,
    simultaneous,
    unreliable_note,
)
from pytest_sglang.loadgen.measure.launch_noise import CANNOT_JUDGE, PASSED, REGRESSED, LaunchSpread, one_launch_note
from pytest_sglang.report import baseline_file, baseline_scope
from pytest_sglang.report.baseline_file import BaselineIndex
from pytest_sglang.report.baseline_launches import between_launches, load_launches
from pytest_sglang.report.baseline_scope import Scope
from pytest_sglang.report.fingerprint import Change, changes, incomparable
from pytest_sglang.report.records import shape_key

OPTION = "--sglang-max-regression"
DEFAULT_LIMIT_PCT = 5.0
#: Load metrics a bare "5%" applies to (SGLang bench_serving names).
LOAD_METRICS = ("output_throughput", "request_throughput", "median_ttft_ms", "p99_ttft_ms",
                "median_itl_ms", "p99_itl_ms", "p99_e2e_latency_ms")
#: Gate-record figures a bare "5%" applies to (metric names of the capacity and hicache gates):
#: deterministic for one setup, so any drop beyond the limit is a change of the setup.
CAPACITY_METRICS = ("max_total_num_tokens", "max_running_requests", "concurrent_requests",
                    "host_pool_tokens", "host_pool_gb_per_rank", "fleet_total_tokens")
DEFAULT_METRICS = LOAD_METRICS + CAPACITY_METRICS
#: Marker keywords accepted as metric names: one declared mapping to the figure each one judges
#: (``max_ttft_ms_p99`` -> ``p99_ttft_ms``, ``min_total_tokens`` -> ``max_total_num_tokens``).
ALIASES: dict[str, str] = {
    **{keyword: floor[0] for keyword, floor in FLOORS.items()},
    "min_total_tokens": "max_total_num_tokens", "min_running_requests": "max_running_requests",
    "min_concurrent_requests": "concurrent_requests", "min_fleet_total_tokens": "fleet_total_tokens",
    "min_context_length": "context_length",
}
#: Every figure a limit can name: bench_serving metrics and capacity/hicache check metrics.
KNOWN_METRICS = frozenset(
    # The figures of a load: its numbers (a dict such as prompt_tokens or workload is not one), less the
    # counters that say how it was measured rather than how the server did.
    {f.name for f in fields(LoadResult) if f.type in ("int", "float")} - {"not_sent", "percentile_sample", "cancelled"}
) | set(CAPACITY_METRICS) | {"context_length", "host_hit_tokens", "host_device_ratio", "repeat_gain",
                              "live_concurrent_requests", "live_completed_requests", "healthy_workers"}
#: Gates whose records are not compared as gate figures: throughput/SLO figures are load metrics
#: (compared per load shape, which a gate record does not carry), the comparison itself, and the
#: start time (noise).
_NOT_COMPARED = ("throughput", "slo", "baseline", "startup")
_LIMIT = re.compile(r"^\s*(?:(?P<metric>[A-Za-z_][A-Za-z0-9_.]*)\s*:)?\s*(?P<pct>\d+(?:\.\d+)?)\s*%?\s*$")


@dataclass(frozen=True)
class Limits:
    """Allowed regression in percent, per metric."""

    per_metric: Mapping[str, float]

    def items(self) -> list[tuple[str, float]]:
        return list(self.per_metric.items())


def parse_limits(text: str | None) -> Limits:
    """``"5%"`` (default metrics) or ``"output_throughput:5%,p99_ttft_ms:10%"``; errors name the option."""
    if text is None or not text.strip():
        return Limits({m: DEFAULT_LIMIT_PCT for m in DEFAULT_METRICS})
    per: dict[str, float] = {}
    given: dict[str, str] = {}  # figure -> how it was written: a figure given twice is ambiguous
    for part in text.split(","):
        match = _LIMIT.match(part)
        if match is None:
            raise ConfigError(OPTION, text, f"cannot read {part.strip()!r}",
                              "write a percentage like 5% or metric:percent pairs like "
                              "output_throughput:5%,p99_ttft_ms:10%")
        pct = float(match["pct"])
        name = "" if match["metric"] is None else metric_name(match["metric"], text)
        key = name or "the bare percentage"
        if key in given:
            raise ConfigError(OPTION, text, f"{key} is given twice ({given[key]} and {part.strip()})",
                              "give each metric (and the bare percentage for the rest) once")
        given[key] = part.strip()
        if not name:
            per.update({m: pct for m in DEFAULT_METRICS if m not in per})
        else:
            per[name] = pct
    return Limits(per)


def paired_limits(text: str | None, metrics: Sequence[str], option: str) -> dict[str, float]:
    """The limits of a paired (A/B) verdict: ``5%`` covers ``metrics``, ``metric:pct,...`` names its own.

    Read by :func:`parse_limits`, errors naming ``option``; every limit is above 0, as a paired verdict
    cannot tell a change of 0 % from noise.
    """
    if text is None:
        return {m: DEFAULT_LIMIT_PCT for m in metrics}
    if not isinstance(text, str):
        raise ConfigError(option, text, f"expected a string, got {type(text).__name__}",
                          "give a percentage like '5%' or metric:percent pairs like 'output_throughput:5%'")
    try:
        per = parse_limits(text).per_metric
    except ConfigError as exc:
        raise ConfigError(option, text, exc.problem, exc.fix) from None
    bare = "," not in text and ":" not in text
    chosen = {m: next(iter(per.values())) for m in metrics} if bare else dict(per)
    for metric, pct in chosen.items():
        if pct <= 0:
            raise ConfigError(option, text, f"the limit of {metric} is {pct:g}%, and a change of 0 % cannot be told "
                              "from noise", "give a limit above 0, e.g. 5%")
    return chosen


def metric_name(name: str, text: str = "") -> str:
    """The figure ``name`` means: itself, or a marker keyword's figure; an unknown name is an error."""
    if name in KNOWN_METRICS:
        return name
    if name in ALIASES:
        return ALIASES[name]
    close = difflib.get_close_matches(name, sorted(KNOWN_METRICS | set(ALIASES)), n=1, cutoff=0.6)
    meant = f"did you mean {close[0]}? " if close else ""
    raise ConfigError(OPTION, text or name, f"unknown metric {name!r}: it would compare nothing",
                      f"{meant}name a bench_serving metric (output_throughput, p99_ttft_ms, ...), a capacity "
                      "figure (max_total_num_tokens, ...) or a marker keyword (max_ttft_ms_p99, min_total_tokens, "
                      "...); see docs/reports.md")


def higher_is_better(metric: str) -> bool:
    """Throughputs and capacities go up when better; latencies (``*_ms``, ``*_s``) go down."""
    return not (metric.endswith("_ms") or metric.endswith("_s") or metric in ("duration", "failed"))


def regression_pct(metric: str, old: float, new: float) -> float:
    """How much worse ``new`` is than ``old``, in percent (negative = better)."""
    if old == 0:
        return 0.0 if new == old else (float("inf") if not higher_is_better(metric) else -100.0)
    change = (new - old) / abs(old) * 100.0
    return -change if higher_is_better(metric) else change


def bound(metric: str, old: float, limit_pct: float) -> float:
    """The worst allowed value: ``old`` minus (or plus, for latencies) ``limit_pct`` percent."""
    factor = 1 - limit_pct / 100 if higher_is_better(metric) else 1 + limit_pct / 100
    return old * factor


def load_report(path: str | Path, option: str = "--sglang-baseline") -> dict[str, Any]:
    """Read a JSON report whose figures can be compared (:func:`.baseline_file.load_report`)."""
    return baseline_file.load_report(path, option, figures=KNOWN_METRICS)


def compare_test(nodeid: str, old_test: Mapping[str, Any], loads: Sequence[Mapping[str, Any]],
                 gates: Sequence[GateOutcome | Mapping[str, Any]], limits: Limits, *,
                 baseline_name: str = "baseline", strict: bool = False,
                 other_launches: Sequence[Mapping[str, Any]] = ()) -> GateOutcome | None:
    """One ``baseline`` outcome for a test (its loads and gate figures), or None: nothing compared.

    A load whose shape the baseline's test never ran is another workload: not compared (a note), and
    with ``strict`` a failed ``workload`` check. ``other_launches``: the same test in the baseline's
    other launches (:mod:`.baseline_launches`): its load metrics are judged against a new launch too.
    A figure the noise cannot judge at its limit is an ``unchecked`` line ("cannot judge ...").
    """
    outcome = GateOutcome("baseline", context={"baseline": baseline_name, "test": nodeid})
    _compare_loads(outcome, old_test.get("loads", []), loads, limits, strict=strict,
                   launches=[t.get("loads", []) for t in other_launches])
    split = routing_split_note(old_test.get("gates", []), gates)
    if split is not None and outcome.checks:
        outcome.notes.append(split)
    old_figures, new_figures = gate_figures(old_test.get("gates", []), limits), gate_figures(gates, limits)
    for (gate, metric), (after, unit) in new_figures.items():
        if (gate, metric) in old_figures:
            _add(outcome, _check(metric, limits.per_metric[base_metric(metric)], old_figures[gate, metric][0],
                                 after, unit, f"{gate} gate record", _CAPACITY_REMEDY))
    if not outcome.checks and not outcome.notes:
        return None
    if any(base_metric(c.metric) in limits.per_metric for c in outcome.checks):
        compared = dict.fromkeys(base_metric(c.metric) for c in outcome.checks
                                 if base_metric(c.metric) in limits.per_metric)
        outcome.notes.append(f"limits: {', '.join(f'{m} {fmt(limits.per_metric[m])}%' for m in compared)} "
                             f"(--sglang-max-regression) against {baseline_name}")
    return outcome


#: Percentage points by which the busiest worker's share must differ for the split to be reported.
SPLIT_NOTE_PP = 10.0


def routing_split_note(old_gates: Sequence[GateOutcome | Mapping[str, Any]],
                       new_gates: Sequence[GateOutcome | Mapping[str, Any]]) -> str | None:
    """A line when a gateway split the test's requests between its workers differently than in the baseline.

    A fleet's throughput and latency follow how the gateway spread the load (one worker with most
    requests runs bigger, slower batches): smg's cache-aware policy, balanced by a load poll every
    ``--load-monitor-interval`` seconds, split the same load 122/7 in one launch and 64/65 in
    another (docs/fleet.md). Shares are compared sorted, largest first: worker URLs differ between
    launches.
    """
    def split(gates: Sequence[GateOutcome | Mapping[str, Any]]) -> list[float] | None:
        for gate in gates:
            shares = worker_shares(gate)
            if shares:
                return sorted((v * 100 for v in shares.values()), reverse=True)
        return None

    old, new = split(old_gates), split(new_gates)
    if old is None or new is None or len(old) != len(new) or abs(old[0] - new[0]) < SPLIT_NOTE_PP:
        return None
    shown = ("/".join(f"{v:.0f}" for v in shares) + " %" for shares in (old, new))
    return (f"the gateway split the requests between its workers differently: baseline {next(shown)}, this run "
            f"{next(shown)} (largest share first): a fleet's figures follow its routing, so a change here may be "
            "the gateway's routing, not the workers (a deterministic policy, e.g. --policy round_robin, "
            "separates the two)")


def compare_loads(nodeid: str, old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]],
                  limits: Limits, *, baseline_name: str = "baseline") -> GateOutcome | None:
    """:func:`compare_test` for load results only."""
    return compare_test(nodeid, {"loads": list(old)}, new, (), limits, baseline_name=baseline_name)


def base_metric(metric: str) -> str:
    """A fleet's per-worker figure (``max_total_num_tokens of worker 0``) is limited as its metric."""
    return metric.split(" of ", 1)[0]


def gate_figures(gates: Sequence[GateOutcome | Mapping[str, Any]], limits: Limits
                 ) -> dict[tuple[str, str], tuple[float, str]]:
    """``(gate, metric) -> (measured, unit)`` for the numeric gate figures that have a limit."""
    figures: dict[tuple[str, str], tuple[float, str]] = {}
    for gate in gates:
        data = gate.to_dict() if isinstance(gate, GateOutcome) else gate
        if data.get("gate") in _NOT_COMPARED:
            continue
        for check in data.get("checks", []):
            measured = check.get("measured")
            if _num(measured) is not None and base_metric(str(check.get("metric"))) in limits.per_metric:
                # Kept as int when whole: "3,000 tokens" reads better than "3,000.0 tokens".
                figures[str(data["gate"]), str(check["metric"])] = (measured, str(check.get("unit", "")))
    return figures


_LOAD_REMEDY = ("find what slowed down (compare the launch args and fingerprint), or "
                "raise --sglang-max-regression if the change is accepted")
_CAPACITY_REMEDY = ("find what shrank it (compare the launch args and fingerprint: --mem-fraction-static, "
                    "--max-total-tokens, --max-running-requests, GPU), or raise --sglang-max-regression "
                    "if the change is accepted")


def _compare_loads(outcome: GateOutcome, old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]],
                   limits: Limits, *, strict: bool, launches: Sequence[Sequence[Mapping[str, Any]]] = ()) -> None:
    old_groups, new_groups = _groups(old), _groups(new)
    other_groups = [_groups(loads) for loads in launches]
    other = [k for k in new_groups if k not in old_groups]
    if other and old_groups:
        _workload_differs(outcome, other, list(old_groups), strict=strict)
    for key in [k for k in new_groups if k in old_groups]:
        runs = [old_groups[key], *(g[key] for g in other_groups if key in g)]
        if _failed(new_groups[key]) or any(_failed(run) for run in runs):
            outcome.notes.append(f"load {key}: not compared, requests failed in one of the runs")
            continue
        pooled = [load for run in runs for load in run]  # the within-launch rules see every launch's repeats
        old_samples, new_samples = _samples(pooled), _samples(new_groups[key])
        if old_samples is None:
            outcome.notes.append(f"load {key}: the baseline stores no per-request samples (written by an older "
                                 "pytest-sglang): its noise is taken as this run's; refresh the baseline")
        requests = min(_completed(pooled), _completed(new_groups[key]))
        judged = []
        for metric, limit in limits.items():
            before, after = _figures(pooled, metric), _figures(new_groups[key], metric)
            if not before or not after:
                continue
            if not reliable(metric, requests):
                outcome.notes.append(f"{metric} not compared: {unreliable_note(metric, requests)}")
                continue
            judged.append((metric, limit, before, after))
        for metric, limit, before, after in judged:
            old_side, new_side = side(metric, before, old_samples), side(metric, after, new_samples)
            check, noise = _load_check(metric, limit, old_side, new_side, f"load {key}", family=len(judged),
                                       repeats=(repeat_sides(metric, before, old_samples),
                                                repeat_sides(metric, after, new_samples)))
            spread = LaunchSpread(tuple(Side(tuple(f)).center for f in (_figures(run, metric) for run in runs) if f))
            if spread.launches >= 2:
                check, cannot = _launches_check(check, metric, limit, spread, old_side, new_side, len(judged))
            else:
                cannot = unreliable_note(metric, requests, noise_pct=noise, limit_pct=limit,
                                         repeats=min(len(before), len(after)))
            _add(outcome, check)
            if check.passed and cannot is not None:
                # A pass that could not have failed at the limit is the third verdict, not "no regression".
                outcome.unchecked.append(f"{cannot} (load {key})")


def _launches_check(check: Check, metric: str, limit: float, spread: LaunchSpread, old: Side, new: Side,
                    family: int) -> tuple[Check, str | None]:
    """The check of a baseline of several launches: regressed only when beyond the limit and both noises.

    ``check`` is the within-launch verdict (:func:`_load_check` on the launches' pooled repeats); the
    change must also be beyond the spread between launches (:func:`.baseline_launches.between_launches`).
    Returns the check and the "cannot judge" line (None: the launches given judge the limit).
    """
    between = between_launches(spread, old, new, limit, higher_is_better(metric), simultaneous(family))
    verdict = between.verdict(limit, within_regressed=not check.passed)
    if verdict == CANNOT_JUDGE and not between.launch_noise:
        cannot = unreliable_note(metric, 1, noise_pct=between.noise_pct, limit_pct=limit)
    else:
        cannot = between.cannot_judge(metric, limit) if verdict == CANNOT_JUDGE else None
    # A throughput cannot be asked to fall below zero: a noise beyond 100 % allows any value.
    moved = max(limit, between.noise_pct)
    worst = bound(metric, spread.center, min(moved, 100.0) if higher_is_better(metric) else moved)
    beyond = ("" if check.passed else "; within the launch it is beyond the noise, ") + (
        "" if check.passed else ("and beyond the noise between launches too" if between.regressed
                                 else "but not beyond the noise between launches: not a regression"))
    return replace(check, required=round(worst, 4), passed=verdict != REGRESSED,
                   detail=f"{check.detail}; against a new launch of the baseline ({fmt(round(spread.center, 4))}, "
                          f"the mean of its {spread.launches} launches): {between.interval_text()}{beyond}"), cannot


def _workload_differs(outcome: GateOutcome, new: Sequence[str], old: Sequence[str], *, strict: bool) -> None:
    detail = f"this run: {'; '.join(new)}; the baseline ran: {'; '.join(old)}"
    outcome.notes.append(f"not compared, the workload differs: {detail}")
    if strict:
        outcome.add(Check("baseline", "workload", "differs", "equal", "==", source="load shapes", passed=False,
                          detail=detail, remedy="run the baseline's load shapes (the marker's keywords), refresh "
                                               "the baseline, or drop --sglang-baseline-strict to only warn"))


def _add(outcome: GateOutcome, check: Check) -> None:
    outcome.add(check)
    if not check.passed:
        outcome.notes.append(f"{check.metric}: {check.detail}")


def _load_check(metric: str, limit: float, old: Side, new: Side, what: str, *, family: int,
                repeats: tuple[Sequence[Side], Sequence[Side]] = ((), ())) -> tuple[Check, float]:
    """Regressed when the change is beyond ``limit`` and the noise, or so in every pair of repeats.

    The first is :func:`..loadgen.intervals.regressed`; the second,
    :func:`..loadgen.intervals.every_pair_regressed` over ``repeats`` (one side per repeat of each
    run), keeps one wild repeat from hiding a regression.

    Returns the check and the noise (percent): a noise above ``limit`` means the limit cannot be judged.

    The required value is the baseline's moved by the larger of the limit and the measured noise
    (the interval's half-width below the point), so that ``measured <op> required`` is exactly that
    verdict. The load regresses when any of its ``family`` metrics does: their intervals hold
    together at CONFIDENCE.
    """
    hib = higher_is_better(metric)
    confidence = simultaneous(family)
    ratio = ratio_interval(old, new, confidence)
    change = regression_interval(ratio, hib)
    noise = max(change.point - change.low, 0.0) if math.isfinite(change.point) else 0.0
    worst = bound(metric, old.center, max(limit, noise))
    pairwise = None if regressed(change, limit) else every_pair_regressed(*repeats, limit, hib, confidence)
    if pairwise is not None:  # beyond the limit in every pair, so the mean is too: the limit decides
        worst = bound(metric, old.center, limit)
    op = ">=" if hib else "<="
    shown = (ratio.point - 1) * 100
    if ratio.measured:
        together = f", {CONFIDENCE:.0%} for the {family} metrics together" if family > 1 else ""
        interval = (f"{confidence:.1%} interval of the change [{(ratio.low - 1) * 100:+.1f}%, "
                    f"{(ratio.high - 1) * 100:+.1f}%] (noise from {_noise(old, new)}{together})")
    else:
        interval = "no interval: no noise was measured (no per-request samples, one repeat)"
    runs = f"{len(old.figures)} vs {len(new.figures)} runs" if max(len(old.figures), len(new.figures)) > 1 else ""
    if pairwise is not None:
        runs += (f"; every one of the {len(new.figures)} runs regressed against each of the baseline's "
                 f"{len(old.figures)} beyond its own noise (least: {pairwise.point:+.1f}%, interval from "
                 f"{pairwise.low:+.1f}%), though their spread widens the interval of the mean")
    check = compare("baseline", metric, round(new.center, 4), op, round(worst, 4), unit=_unit(metric),
                    source="load run vs baseline report",
                    detail=f"baseline {fmt(round(old.center, 4))}, this run {fmt(round(new.center, 4))} "
                           f"({shown:+.1f}%), {interval}, allowed regression {fmt(limit)}%: regressed when the "
                           f"change is beyond it and beyond the noise{'; ' + runs if runs else ''}; {what}",
                    remedy=_LOAD_REMEDY)
    return check, noise


def _noise(old: Side, new: Side) -> str:
    found = dict.fromkeys(s.measured_by for s in (old, new))
    return "; ".join(f"{'baseline' if s is old else 'this run'}: {s.measured_by}" for s in (old, new)) \
        if len(found) > 1 else next(iter(found))


def _check(metric: str, limit: float, before: float, after: float, unit: str, what: str, remedy: str) -> Check:
    worst = bound(metric, before, limit)
    op = ">=" if higher_is_better(metric) else "<="
    pct = regression_pct(metric, before, after)
    change = f"{-pct:+.1f}%" if higher_is_better(metric) else f"{pct:+.1f}%"
    source = "load run" if what.startswith("load ") else what
    return compare("baseline", metric, round(after, 4), op, round(worst, 4), unit=unit,
                   source=f"{source} vs baseline report",
                   detail=f"baseline {fmt(before)}, this run {fmt(after)} ({change}), "
                          f"allowed regression {fmt(limit)}%; {what}",
                   remedy=remedy)


def _groups(loads: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for load in loads:
        groups.setdefault(shape_key(load), []).append(load)
    return groups


def _failed(loads: list[Mapping[str, Any]]) -> bool:
    return any((_num(ld.get("failed")) or 0) > 0 for ld in loads)


def _figures(loads: list[Mapping[str, Any]], metric: str) -> list[float]:
    """The per-repeat figures of one shape (its interval's between-run noise)."""
    return [v for v in (_num(ld.get(metric)) for ld in loads) if v is not None]


def _completed(loads: list[Mapping[str, Any]]) -> int:
    """Requests behind one repeat's percentile: the fewest of the repeats."""
    return min(int(_num(ld.get("completed")) or 0) for ld in loads)


def _samples(loads: list[Mapping[str, Any]]) -> list[Samples] | None:
    """Each repeat's per-request samples, or None when a load stores none (an older report)."""
    found = [ld.get("samples") for ld in loads]
    if not all(isinstance(s, Mapping) and s.get("ttft_ms") for s in found):
        return None
    return [Samples.from_dict(data) for data in found if isinstance(data, Mapping)]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _unit(metric: str) -> str:
    if metric.endswith("_ms"):
        return "ms"
    if metric in ("output_throughput", "input_throughput", "total_throughput", "max_output_tokens_per_s"):
        return "tok/s"
    return "req/s" if metric == "request_throughput" else ""


class BaselineSummary(TypedDict):
    """The ``baseline`` object of the JSON report."""

    path: str
    strict: bool
    limits: dict[str, float]
    #: False: another setup, nothing was compared (the differences say why).
    comparable: bool
    #: Comparable fields that differ, e.g. ``gpu_model: 'H100' (baseline) != 'A100' (this run)``.
    fingerprint_differences: list[str]
    #: What the candidate changes: ``{"field", "baseline", "candidate"}``.
    candidate_changes: list[dict[str, str]]
    #: Tests that measured figures but that the baseline does not have (by id or key): not compared.
    not_in_baseline: list[str]
    #: True: tests measured figures and none of them is in the baseline (a failure, not a note).
    compared_nothing: bool
    #: The launches the baseline holds (a directory: one report each) and their files.
    launches: int
    launch_files: list[str]
    #: One launch: the line saying it cannot know the noise between launches (else None).
    launch_note: str | None


@dataclass
class BaselineContext:
    """A loaded baseline: its report, limits, and how a candidate's fingerprint compares with its own."""

    path: str
    report: dict[str, Any]
    limits: Limits
    strict: bool = False
    #: Every launch of the baseline, ``(file, report)``; ``report`` is the first (empty: that one alone).
    launches: Sequence[tuple[str, dict[str, Any]]] = ()
    #: Whether any test of this session is in the baseline (set by :meth:`expect`; None: not told).
    session_in_baseline: bool | None = None
    #: The baseline's tests with figures to compare, found by id, key or the end of the id.
    index: BaselineIndex = field(init=False)
    #: The same for the other launches (a baseline directory).
    _others: list[BaselineIndex] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.launches = list(self.launches) or [(self.path, self.report)]
        # Every test with figures: a test that opts in (compare="all") finds its probe loads there too.
        self.index, *self._others = [
            BaselineIndex([t for t in report.get("tests", [])
                           if self.measures(t.get("loads", []), t.get("gates", []), "all")])
            for _, report in self.launches]

    @property
    def fingerprint(self) -> Mapping[str, object]:
        found = self.report.get("fingerprint")
        return found if isinstance(found, Mapping) else {}

    def incomparable(self, candidate: Mapping[str, object]) -> list[str]:
        """What makes the figures incomparable (model, GPU, host differ): then nothing is compared."""
        return incomparable(self.fingerprint, candidate)

    def changes(self, candidate: Mapping[str, object]) -> list[Change]:
        """What the candidate changes (launch args, SGLang version, image, runner): compared and shown."""
        return changes(self.fingerprint, candidate)

    def measures(self, loads: Sequence[Mapping[str, Any]], gates: Sequence[GateOutcome | Mapping[str, Any]],
                 scope: Scope = "measurements") -> bool:
        """Whether a test produced figures this baseline compares (:mod:`.baseline_scope`: which loads)."""
        if scope == "none":
            return False
        return bool(baseline_scope.select(loads, scope)[0]) or bool(gate_figures(gates, self.limits))

    def expect(self, tests: Iterable[tuple[str, str | None]]) -> None:
        """This session's tests, ``(id, key)``: when none is in the baseline, every comparing test fails.

        A baseline was given, so comparing was the point: a run that can compare nothing (a baseline
        of another suite, every test renamed) must not pass as if it had.
        """
        self.session_in_baseline = any(self.index.find(nodeid, key) is not None for nodeid, key in tests)

    def outcome(self, nodeid: str, loads: Sequence[Mapping[str, Any]],
                gates: Sequence[GateOutcome | Mapping[str, Any]], candidate: Mapping[str, object],
                key: str | None = None, scope: Scope = "measurements") -> GateOutcome | None:
        """The baseline outcome of one test (``key``: its :func:`.baseline_file.stable_key`), or None.

        On another setup: None (the run's summary warns), or with ``strict`` a failed check. Otherwise
        the regression checks, with what the candidate changes at the top of the notes. ``scope``
        (``@pytest.mark.sglang_baseline``) says which loads are compared; each load left out is a note.
        """
        if not self.measures(loads, gates, "all"):
            return None
        context = {"baseline": self.path, "test": nodeid}
        if scope == "none":
            return GateOutcome("baseline", notes=[baseline_scope.opted_out(self.path)], context=context)
        kept, left_out = baseline_scope.select(loads, scope)
        if not self.measures(kept, gates, scope):
            return GateOutcome("baseline", notes=left_out, context=context)
        loads = kept
        differs = self.incomparable(candidate)
        if differs:
            return self._not_comparable(differs) if self.strict else None
        found = self.index.find(nodeid, key)
        if found is None:
            return self._not_in_baseline(nodeid)
        old = {**found.test, "loads": baseline_scope.select(found.test.get("loads", []), scope)[0]}
        others = [{"loads": baseline_scope.select(other.test.get("loads", []), scope)[0]}
                  for other in (index.find(nodeid, key) for index in self._others) if other is not None]
        outcome = compare_test(nodeid, old, loads, gates, self.limits, baseline_name=self.path,
                               strict=self.strict, other_launches=others)
        if outcome is None and left_out:
            outcome = GateOutcome("baseline", context=context)
        if outcome is not None:
            outcome.notes.extend(left_out)
            matched = found.note(self.path)
            outcome.notes[:0] = [f"candidate vs baseline: {c.line()}" for c in self.changes(candidate)] + (
                [matched] if matched else [])
            outcome.context["launches"] = 1 + len(others)
            if len(self.launches) == 1:  # said by every report: a red here may be the launch, not the change
                outcome.context["launch_note"] = one_launch_note(self.path)
            outcome.context["verdict"] = (REGRESSED if not outcome.passed else CANNOT_JUDGE if outcome.unchecked
                                          else PASSED)
        return outcome

    def summary(self, candidate: Mapping[str, object] | None,
                measured: Sequence[tuple[str, str | None]] = ()) -> BaselineSummary:
        """The report's ``baseline`` object for the candidate run (None: no server, nothing to compare).

        ``measured``: ``(id, key)`` of each test of the run that measured figures this baseline compares.
        """
        differs = self.incomparable(candidate) if candidate is not None else []
        changed = self.changes(candidate) if candidate is not None and not differs else []
        missing = [] if differs else [nodeid for nodeid, key in measured if self.index.find(nodeid, key) is None]
        return BaselineSummary(path=self.path, strict=self.strict, limits=dict(self.limits.per_metric),
                               comparable=not differs, fingerprint_differences=differs,
                               candidate_changes=[c.to_dict() for c in changed],
                               not_in_baseline=list(dict.fromkeys(missing)),
                               compared_nothing=bool(missing) and len(missing) == len(measured),
                               launches=len(self.launches), launch_files=[f for f, _ in self.launches],
                               launch_note=one_launch_note(self.path) if len(self.launches) == 1 else None)

    def _not_in_baseline(self, nodeid: str) -> GateOutcome:
        """A visible line; a failed check with ``strict``, or when no test of the session is in the baseline."""
        nothing = self.session_in_baseline is False
        if nothing:
            ran = [str(t.get("nodeid")) for t in self.index.tests]
            more = " ..." if len(ran) > 3 else ""
            has = f"it has {len(ran)} test(s) with figures: {', '.join(ran[:3])}{more}" if ran else \
                "it has no test with figures"
            line = (f"compared nothing: none of this run's tests is in the baseline {self.path} ({has}); this test, "
                    f"{nodeid}, was compared with nothing")
            fix = ("run the tests the baseline ran, record a baseline of these tests with --sglang-report, or drop "
                   "--sglang-baseline")
        else:
            line = f"not compared: {self.path} has no test {nodeid} (renamed, or new since the baseline)"
            fix = "refresh the baseline, or drop --sglang-baseline-strict to only warn"
        outcome = GateOutcome("baseline", notes=[line], context={"baseline": self.path, "test": nodeid})
        if self.strict or nothing:
            outcome.add(Check("baseline", "test_in_baseline", False, True, "==", source=self.path, passed=False,
                              detail=line, remedy=fix))
        return outcome

    def _not_comparable(self, differs: Sequence[str]) -> GateOutcome:
        check = Check("baseline", "fingerprint", "differs", "equal", "==", source="report fingerprints",
                      passed=False, detail="; ".join(differs),
                      remedy=f"compare on the same model, GPU and host, refresh the baseline {self.path}, or "
                             "drop --sglang-baseline-strict to only warn")
        notes = [f"not compared with {self.path}: the figures were measured on another setup:", *differs]
        return GateOutcome("baseline", [check], notes=notes)


def open_baseline(path: str, max_regression: str | None, strict: bool) -> BaselineContext:
    """The baseline at ``path``: one report (one launch) or a directory of reports, one per launch."""
    launches = load_launches(path, "--sglang-baseline", KNOWN_METRICS)
    return BaselineContext(path, launches[0][1], parse_limits(max_regression), strict, launches)
