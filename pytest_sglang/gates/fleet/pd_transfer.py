"""The KV transfer of a prefill-decode fleet under load, from the workers' own ``/metrics`` (SGLang 0.5.23).

Read on every prefill and decode worker just before and just after a load sent through the gateway;
the growth is what the load did:

* ``sglang:num_transfer_failed_reqs_total`` and ``sglang:num_bootstrap_failed_reqs_total``: requests
  whose KV transfer, or whose handshake with the peer (bootstrap), failed. SGLang counts a failure on
  the side that saw it, and a failed transfer is often seen on both (prefill's sender and decode's
  receiver), so the figure judged is the larger of the prefill workers' sum and the decode workers'
  sum: a lower bound of the failed requests that never counts one twice. A counter SGLang never
  incremented is absent from ``/metrics``: read as 0 on a worker whose ``/metrics`` answers.
* ``sglang:kv_transfer_latency_ms``, ``sglang:kv_transfer_bootstrap_ms``, ``sglang:kv_transfer_speed_gb_s``
  (histograms: the growth of ``_sum`` over the growth of ``_count`` is the load's mean). The transfer's
  share of TTFT is the mean transfer latency over the load's mean TTFT (client side).

Needs the workers launched with ``--enable-metrics`` and reachable from here; otherwise every figure
is unknown, which fails its check (a transfer nobody could see never passes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import Check, compare
from pytest_sglang.gates.fleet.pd_roles import GATE, PD_ROLES
from pytest_sglang.sglang import metrics_text

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import WorkerHandle
    from pytest_sglang.loadgen import LoadResult

__all__ = ["COUNTERS", "HISTOGRAMS", "Limits", "TransferWindow", "read_all", "transfer_checks"]

#: kind -> SGLang 0.5.23's counter of the requests that failed it.
COUNTERS = {"transfer": "sglang:num_transfer_failed_reqs_total",
            "bootstrap": "sglang:num_bootstrap_failed_reqs_total"}
#: figure -> SGLang 0.5.23's histogram (observed once per transferred request).
HISTOGRAMS = {"transfer_ms": "sglang:kv_transfer_latency_ms", "bootstrap_ms": "sglang:kv_transfer_bootstrap_ms",
              "speed_gb_s": "sglang:kv_transfer_speed_gb_s"}
_METRICS_FIX = ("launch every prefill and decode worker with --enable-metrics and run the tests where their "
                "addresses are reachable (the transfer is counted only in the workers' own /metrics)")
_FAILURE_FIX = {
    "transfer": ("read the decode and prefill workers' logs for the failed transfers: check the transfer backend "
                 "and its network (--disaggregation-transfer-backend, --disaggregation-ib-device; mooncake needs "
                 "an RDMA device) and, with --disaggregation-enable-kv-checksum, the KV checksums"),
    "bootstrap": ("a decode worker could not reach its prefill peer's bootstrap server: check that the gateway "
                  "gives each prefill worker its own --disaggregation-bootstrap-port (--prefill URL PORT), that "
                  "the port is reachable from the decode nodes, and that no prefill worker was restarted or lost"),
}
_UNSEEN_FIX = ("no transfer was recorded: SGLang 0.5.23 observes sglang:kv_transfer_latency_ms on the prefill worker "
               "for each request whose KV it sent; check that the gateway really pairs the workers (the roles "
               "above) and that the transfer backend reports its transfers")
_SLOW_FIX = ("the KV transfer is slow for this fabric: check that the transfer uses RDMA (mooncake falls back "
             "to TCP without an RDMA device: --disaggregation-ib-device), and the transfer backend")


def _keys() -> tuple[str, ...]:
    return (*COUNTERS.values(), *(f"{h}_{part}" for h in HISTOGRAMS.values() for part in ("sum", "count")))


def _read(worker: WorkerHandle) -> dict[str, float] | str:
    """The worker's PD figures now, or why they cannot be read."""
    samples = worker.metrics_or_why()
    if isinstance(samples, str):
        return samples
    return {key: metrics_text.value(samples, key) or 0.0 for key in _keys()}


def read_all(workers: list[WorkerHandle]) -> dict[str, dict[str, float] | str]:
    """Every prefill and decode worker's figures now, by URL."""
    return {w.url: _read(w) for w in workers if w.role in PD_ROLES}


@dataclass(frozen=True)
class TransferWindow:
    """What the PD workers' figures grew by during one load, by URL (or why a worker's is unknown)."""

    workers: list[WorkerHandle]
    growth: dict[str, dict[str, float]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    @classmethod
    def between(cls, workers: list[WorkerHandle], before: Mapping[str, dict[str, float] | str],
                after: Mapping[str, dict[str, float] | str]) -> TransferWindow:
        """The growth from ``before`` to ``after``; a figure that went down means the worker restarted."""
        growth: dict[str, dict[str, float]] = {}
        missing: dict[str, str] = {}
        pd = [w for w in workers if w.role in PD_ROLES]
        for worker in pd:
            old, new = before.get(worker.url, "not read"), after.get(worker.url, "not read")
            if isinstance(old, str) or isinstance(new, str):
                missing[worker.url] = old if isinstance(old, str) else str(new)
            elif any(new[k] < old[k] for k in old):
                missing[worker.url] = "its counters went down during the load (restarted?)"
            else:
                growth[worker.url] = {k: new[k] - old[k] for k in old}
        return cls(pd, growth, missing)

    def role_sum(self, key: str, role: str) -> float:
        """``key``'s growth summed over the known workers of ``role``."""
        return sum(self.growth[w.url][key] for w in self.workers if w.role == role and w.url in self.growth)

    def failures(self, kind: str) -> tuple[int | None, str]:
        """Failed requests of ``kind`` (``transfer``/``bootstrap``) and how the figure was made."""
        name = COUNTERS[kind]
        sums = {role: int(self.role_sum(name, role)) for role in PD_ROLES}
        said = ", ".join(f"{role} workers {n}" for role, n in sums.items())
        if self.missing:
            return None, f"growth of {name}: unknown ({self.why_unknown()})"
        return max(sums.values()), (f"growth of {name} during the load: {said} (the larger: SGLang counts a "
                                    "failure on each side that saw it)")

    def mean(self, figure: str) -> tuple[float | None, int]:
        """The load's mean of histogram ``figure`` over every known worker, and the observations."""
        name = HISTOGRAMS[figure]
        count = sum(self.role_sum(f"{name}_count", role) for role in PD_ROLES)
        total = sum(self.role_sum(f"{name}_sum", role) for role in PD_ROLES)
        return (total / count if count else None), int(count)

    def why_unknown(self) -> str:
        """The workers whose figures are unknown, and why."""
        names = {w.url: w.name() for w in self.workers}
        return "; ".join(f"{names.get(u, u)}: {why}" for u, why in self.missing.items())

    def describe(self, result: LoadResult) -> str:
        """The transfer figures of the load, for the message's context."""
        parts = []
        for figure, unit in (("transfer_ms", "ms"), ("bootstrap_ms", "ms"), ("speed_gb_s", "GB/s")):
            mean, count = self.mean(figure)
            shown = f"{fmt(round(mean, 3))} {unit} mean over {count}" if mean is not None else "none observed"
            parts.append(f"{HISTOGRAMS[figure]} {shown}")
        ttft = result.mean_ttft_ms if result.completed else None
        transfer, bootstrap = self.mean("transfer_ms")[0], self.mean("bootstrap_ms")[0]
        if ttft and transfer is not None:
            boot = f", bootstrap {bootstrap / ttft:.1%}" if bootstrap is not None else ""
            parts.append(f"share of the mean TTFT {ttft:.1f} ms: transfer {transfer / ttft:.1%}{boot}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Limits:
    """The transfer limits of the marker (None: not checked)."""

    max_transfer_failures: int | None = None
    max_transfer_failure_rate: float | None = None
    max_bootstrap_failures: int | None = None
    max_bootstrap_failure_rate: float | None = None
    max_transfer_share: float | None = None
    max_transfer_ms: float | None = None


def _failure_checks(window: TransferWindow, kind: str, count: int | None, rate: float | None,
                    result: LoadResult) -> list[Check]:
    measured, source = window.failures(kind)
    remedy = _FAILURE_FIX[kind] if not window.missing else _METRICS_FIX
    checks = []
    if count is not None or rate is None:  # neither given: no failure is allowed
        checks.append(compare(GATE, f"{kind}_failures", measured, "<=", count or 0, unit="requests", source=source,
                              remedy=remedy, keyword=f"max_{kind}_failures"))
    if rate is not None:
        # The counters also count the load's warmup requests: they are part of what was sent.
        sent = result.completed + result.failed + result.spec.warmup
        share = round(measured / sent, 6) if measured is not None and sent else None
        checks.append(compare(GATE, f"{kind}_failure_rate", share, "<=", rate, remedy=remedy,
                              source=f"{source}, over the {sent} requests sent ({result.spec.warmup} of them warmup)",
                              keyword=f"max_{kind}_failure_rate"))
    return checks


def transfer_checks(window: TransferWindow, result: LoadResult, limits: Limits) -> list[Check]:
    """The failure limits (always: none allowed by default) and the latency ceilings that were given."""
    checks = [*_failure_checks(window, "transfer", limits.max_transfer_failures, limits.max_transfer_failure_rate,
                               result),
              *_failure_checks(window, "bootstrap", limits.max_bootstrap_failures,
                               limits.max_bootstrap_failure_rate, result)]
    transfer, observed = window.mean("transfer_ms")
    why = (window.why_unknown() if window.missing
           else f"no {HISTOGRAMS['transfer_ms']} observation during the load")
    source = (f"growth of {HISTOGRAMS['transfer_ms']}_sum / _count over {observed} transfers"
              if transfer is not None else f"unknown: {why}")
    remedy = _SLOW_FIX if transfer is not None else _METRICS_FIX if window.missing else _UNSEEN_FIX
    if limits.max_transfer_ms is not None:
        checks.append(compare(GATE, "transfer_ms_mean", None if transfer is None else round(transfer, 3), "<=",
                              limits.max_transfer_ms, unit="ms", source=source, remedy=remedy,
                              keyword="max_transfer_ms"))
    if limits.max_transfer_share is not None:
        ttft = result.mean_ttft_ms if result.completed else None
        share = round(transfer / ttft, 4) if transfer is not None and ttft else None
        checks.append(compare(GATE, "transfer_share_of_ttft", share, "<=", limits.max_transfer_share,
                              source=f"{source}, over the load's mean TTFT "
                                     f"{'unknown: no request completed' if ttft is None else f'{ttft:.1f} ms'} "
                                     "(client side)",
                              remedy=remedy if ttft is not None else "", keyword="max_transfer_share"))
    return checks
