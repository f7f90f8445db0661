"""``@pytest.mark.sglang_slo``: the highest concurrency at which latency SLOs still hold.

A short bounded search: check ``min_concurrency`` first (the answer that matters), then double
until the SLO breaks, then bisect between the last good and first bad level. The search stops at
``max_requests`` requests or ``time_budget_s`` seconds, whichever comes first, and reports the
curve it measured (concurrency -> p99 latencies, throughput).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.gates.keywords import (
    AnyOf,
    AtLeast,
    AtMost,
    Count,
    NotBelow,
    OneOf,
    OptionalCount,
    Seconds,
    Threshold,
)
from pytest_sglang.gates.load.shares import run_loads
from pytest_sglang.gates.load.throughput import FLOORS, Length, Timeout, judge
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.measure.intervals import reliable, unreliable_note
from pytest_sglang.loadgen.shape.spec import APIS, MAX_IN_FLIGHT

GATE = "slo"


@dataclass
class Search:
    """State of one search: measured levels and what is left of the budget."""

    #: Runs ``requests`` requests at ``concurrency``: ``run(concurrency, requests)``.
    run: Callable[[int, int], LoadResult]
    ceilings: dict[str, float]
    max_requests: int
    time_budget_s: float
    min_requests_per_level: int = 16
    started: float = field(default_factory=time.monotonic)
    used_requests: int = 0
    curve: dict[int, dict[str, Any]] = field(default_factory=dict)
    reasons: dict[int, str] = field(default_factory=dict)
    stop_reason: str = ""

    def requests_for(self, c: int) -> int:
        # Twice the concurrency so that the level reaches steady state, and a floor for stable p99s.
        return max(2 * c, self.min_requests_per_level)

    def can_run(self, c: int) -> bool:
        if time.monotonic() - self.started >= self.time_budget_s:
            self.stop_reason = self.stop_reason or f"time budget of {self.time_budget_s:g} s used"
            return False
        if self.used_requests + self.requests_for(c) > self.max_requests:
            self.stop_reason = f"request budget of {self.max_requests} used ({self.used_requests} sent)"
            return False
        return True

    def left_s(self) -> float:
        return self.time_budget_s - (time.monotonic() - self.started)

    def holds(self, c: int) -> bool:
        if c in self.curve:
            return bool(self.curve[c]["slo_met"])
        n = self.requests_for(c)
        result: LoadResult = self.run(c, n)
        self.used_requests += n
        if result.not_sent and self.left_s() <= 0:
            # The level was cut by the budget (its load deadline), not judged on a full run.
            self.stop_reason = f"time budget of {self.time_budget_s:g} s ran out during concurrency {c}"
            return False
        # Each level is one point of the curve: its figures, not an interval (a level is a probe, not a verdict).
        outcome = judge(result, dict(self.ceilings), 0.0, reading="point")
        self.curve[c] = point(result, outcome.passed)
        if not outcome.passed:
            self.reasons[c] = "; ".join(
                f"{k.metric} {k.measured} (limit {k.op} {k.required})" for k in outcome.failed
            )
        return outcome.passed


def point(result: LoadResult, met: bool) -> dict[str, Any]:
    return {
        "slo_met": met,
        "p99_ttft_ms": round(result.p99_ttft_ms, 3),
        "p99_itl_ms": round(result.p99_itl_ms, 3),
        "median_tpot_ms": round(result.median_tpot_ms, 3),
        "p99_e2e_latency_ms": round(result.p99_e2e_latency_ms, 3),
        "output_throughput": round(result.output_throughput, 3),
        "failed": result.failed,
        "requests": result.completed + result.failed,
    }


def search(s: Search, min_concurrency: int, max_concurrency: int) -> int:
    """The highest concurrency found that meets the SLO (0 if none was)."""
    if not s.can_run(min_concurrency):
        return 0
    if not s.holds(min_concurrency):
        # Below the floor: halve a few times so the report says how far off the server is.
        c = min_concurrency // 2
        while c >= 1 and s.can_run(c):
            if s.holds(c):
                return c
            c //= 2
        return 0
    good, bad = min_concurrency, None
    while good < max_concurrency:
        c = min(good * 2, max_concurrency)
        if not s.can_run(c):
            return good
        if not s.holds(c):
            bad = c
            break
        good = c
    if bad is None:
        s.stop_reason = s.stop_reason or f"max_concurrency={max_concurrency} reached"
        return good
    while bad - good > max(1, good // 8):  # within ~12% is precise enough for a gate
        mid = (good + bad) // 2
        if not s.can_run(mid):
            break
        if s.holds(mid):
            good = mid
        else:
            bad = mid
    s.stop_reason = s.stop_reason or f"bracketed between {good} (met) and {bad} (broken)"
    return good


@keywords.rules(
    AnyOf(("max_ttft_ms_p99", "max_itl_ms_p99", "max_tpot_ms_median", "max_e2e_ms_p99")),
    NotBelow("max_concurrency", "min_concurrency"),
)
def run_marker(
    ctx: GateContext,
    *,
    max_ttft_ms_p99: Threshold = None,
    max_itl_ms_p99: Threshold = None,
    max_tpot_ms_median: Threshold = None,
    max_e2e_ms_p99: Threshold = None,
    min_concurrency: Annotated[int, AtLeast(1), AtMost(MAX_IN_FLIGHT)],
    input_len: Length = 512,
    output_len: Length = 128,
    api: Annotated[str, OneOf(APIS)] = "native",
    max_concurrency: Annotated[int, AtLeast(1), AtMost(MAX_IN_FLIGHT)] = 512,
    max_requests: Count = 2000,
    time_budget_s: Seconds = 300.0,
    request_timeout_s: Timeout = None,
    load_timeout_s: Timeout = None,
    load_nodes: OptionalCount = None,
) -> GateOutcome:
    """Find the highest concurrency meeting the SLO; fail if it is below ``min_concurrency``.

    ``time_budget_s`` is a deadline: a level still running when it passes is cut short and not judged.
    ``request_timeout_s`` and ``load_timeout_s`` apply to each level's load. On a fleet the loads go
    through the gateway and the outcome records each worker's share of all the search's requests
    (``context["worker_shares"]``).
    """
    ceilings = {
        k: v
        for k, v in (
            ("max_ttft_ms_p99", max_ttft_ms_p99),
            ("max_itl_ms_p99", max_itl_ms_p99),
            ("max_tpot_ms_median", max_tpot_ms_median),
            ("max_e2e_ms_p99", max_e2e_ms_p99),
        )
        if v is not None
    }
    _validate(ceilings, min_concurrency, max_concurrency)
    # load_nodes unset: the run's --sglang-load-nodes (applied by the plugin's load).
    base = LoadSpec(input_len=input_len, output_len=output_len, api=api, request_timeout_s=request_timeout_s,
                    nodes=load_nodes or 1)

    def run(c: int, n: int) -> LoadResult:
        budget = max(s.left_s(), 0.1)
        deadline = budget if load_timeout_s is None else min(load_timeout_s, budget)
        result: LoadResult = ctx.load(base.replace(concurrency=c, requests=n, load_timeout_s=deadline))
        return result

    s = Search(run=run, ceilings=ceilings, max_requests=max_requests, time_budget_s=time_budget_s)
    best, shares = run_loads(ctx.server, lambda: search(s, min_concurrency, max_concurrency))
    outcome = GateOutcome(gate=GATE)
    if shares is not None:  # a fleet: each worker's share of every level's requests together
        shares.record(outcome)
    slo = ", ".join(f"{k} {v:g}" for k, v in ceilings.items())
    outcome.add(
        compare(
            GATE,
            "max_concurrency_meeting_slo",
            best,
            ">=",
            min_concurrency,
            unit="concurrent requests",
            keyword="min_concurrency",
            source="bounded search with the load generator",
            remedy="raise capacity (--max-running-requests, --tp/--dp, --chunked-prefill-size) "
            "or relax the SLO",
            detail=f"SLO: {slo}; input_len={input_len}, output_len={output_len}, api={api}",
        )
    )
    outcome.context["slo"] = slo
    outcome.context["curve"] = {str(c): p for c, p in sorted(s.curve.items())}
    outcome.context["search"] = (
        f"{len(s.curve)} levels, {s.used_requests} requests, "
        f"{time.monotonic() - s.started:.1f} s; stopped: {s.stop_reason or 'done'}"
    )
    for c, why in sorted(s.reasons.items()):
        outcome.notes.append(f"concurrency {c}: SLO broken: {why}")
    outcome.notes += unreliable_levels(ceilings, s.curve)
    return outcome


def unreliable_levels(ceilings: dict[str, float], curve: dict[int, dict[str, Any]]) -> list[str]:
    """A warning line per ceiling judged on a percentile from too few requests at some level."""
    lines = []
    for keyword in ceilings:
        metric = FLOORS[keyword][0]
        few = sorted(c for c, p in curve.items() if not reliable(metric, int(p["requests"])))
        if few:
            levels = ", ".join(f"{c} ({curve[c]['requests']} requests)" for c in few)
            fewest = min(int(curve[c]["requests"]) for c in few)
            lines.append(f"WARNING: {keyword}: at concurrency {levels}: {unreliable_note(metric, fewest)}")
    return lines


def _validate(ceilings: dict[str, float], min_concurrency: int, max_concurrency: int) -> None:
    if not ceilings:
        raise ConfigError(
            "sglang_slo",
            "no ceiling",
            "needs at least one latency ceiling",
            "give max_ttft_ms_p99=, max_itl_ms_p99=, max_tpot_ms_median= or max_e2e_ms_p99=",
        )
    if isinstance(min_concurrency, bool) or not isinstance(min_concurrency, int) or min_concurrency < 1:
        raise ConfigError(
            "sglang_slo(min_concurrency=...)",
            min_concurrency,
            "must be a whole number >= 1",
            "give the lowest concurrency the SLO must hold at, e.g. min_concurrency=8",
        )
    if max_concurrency < min_concurrency:
        raise ConfigError(
            "sglang_slo(max_concurrency=...)",
            max_concurrency,
            f"is below min_concurrency={min_concurrency}",
            "raise max_concurrency",
        )
