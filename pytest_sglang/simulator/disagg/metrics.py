"""The prefill-decode ``/metrics`` families, as 0.5.23's ``observability/metrics_collector.py`` writes them.

Names, types and labels are SGLang's. A PD worker's scheduler series carry ``engine_type="prefill"``
or ``"decode"`` (``DisaggregationMode.to_engine_type``) instead of ``"unified"``. The queue gauges
exist on every worker; the counters ``num_bootstrap_failed_reqs_total`` /
``num_transfer_failed_reqs_total`` appear at their first increment, the histograms at their first
observation (prometheus_client's labelled children). Prefill observes ``kv_transfer_latency_ms``,
``kv_transfer_total_mb``, ``kv_transfer_speed_gb_s`` and (like decode) ``kv_transfer_bootstrap_ms``
/ ``kv_transfer_alloc_ms``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_sglang.simulator.scheduling.prometheus import PromText
from pytest_sglang.simulator.scheduling.prometheus import labels as _labels
from pytest_sglang.simulator.scheduling.stats import Histogram

SPEED_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 400.0)
LATENCY_BUCKETS = (1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0)
BOOTSTRAP_BUCKETS = (1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0)
SIZE_BUCKETS = (1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10000.0)

#: (gauge, help) in 0.5.23's order; the key is the queue's name in :attr:`PDStats.queues`.
QUEUE_GAUGES = (
    ("num_prefill_bootstrap_queue_reqs", "The number of requests in the prefill bootstrap queue."),
    ("num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue."),
    ("num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue."),
    ("num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue."),
)


@dataclass
class PDStats:
    """What one PD worker counts for ``/metrics``."""

    bootstrap_failed: int = 0
    transfer_failed: int = 0
    queues: dict[str, int] = field(default_factory=lambda: {name: 0 for name, _ in QUEUE_GAUGES})
    latency_ms: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    total_mb: Histogram = field(default_factory=lambda: Histogram(SIZE_BUCKETS))
    speed_gb_s: Histogram = field(default_factory=lambda: Histogram(SPEED_BUCKETS))
    bootstrap_ms: Histogram = field(default_factory=lambda: Histogram(BOOTSTRAP_BUCKETS))
    alloc_ms: Histogram = field(default_factory=lambda: Histogram(BOOTSTRAP_BUCKETS))
    #: the last transfer's figures (0.5.23 keeps them for ``/v1/loads``)
    last_latency_ms: float = 0.0
    last_speed_gb_s: float = 0.0

    def observe_transfer(self, seconds: float, nbytes: int) -> None:
        """Prefill side: one finished KV transfer (``compute_and_observe_kv_transfer_metrics``)."""
        if seconds <= 0:
            return
        mb = nbytes / 2**20
        self.last_latency_ms, self.last_speed_gb_s = seconds * 1000, mb / 1024 / seconds
        self.latency_ms.observe(self.last_latency_ms)
        self.total_mb.observe(mb)
        self.speed_gb_s.observe(self.last_speed_gb_s)

    def observe_bootstrap(self, bootstrap_s: float, alloc_s: float) -> None:
        self.bootstrap_ms.observe(bootstrap_s * 1000)
        self.alloc_ms.observe(alloc_s * 1000)


def render(stats: PDStats, sched: dict[str, str], skip: frozenset[str] = frozenset()) -> str:
    """The PD families for the scheduler label set ``sched`` (Prometheus text), but the gauges in ``skip``."""
    out = PromText()
    s = _labels(**sched)
    for name, help_text in QUEUE_GAUGES:
        if name in skip:
            continue
        out.family(name, "gauge", help_text, [(s, stats.queues[name])])
    for name, help_text, count in (
        ("num_bootstrap_failed_reqs_total", "The number of bootstrap failed requests.", stats.bootstrap_failed),
        ("num_transfer_failed_reqs_total", "The number of transfer failed requests.", stats.transfer_failed),
    ):
        if count:
            out.family(name, "counter", help_text, [(s, count)])
    for name, help_text, hist in (
        ("kv_transfer_speed_gb_s", "Histogram of KV cache transfer speed in GB/s.", stats.speed_gb_s),
        ("kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.", stats.latency_ms),
        ("kv_transfer_bootstrap_ms", "Histogram of KV transfer bootstrap time in ms.", stats.bootstrap_ms),
        ("kv_transfer_alloc_ms", "Histogram of KV transfer allocation waiting time in ms.", stats.alloc_ms),
        ("kv_transfer_total_mb", "Histogram of KV cache transfer size in MB.", stats.total_mb),
    ):
        if hist.count:
            out.histogram(name, help_text, [(sched, hist)])
    return "\n".join(out.lines) + "\n"


def merge(text: str, mode: str, stats: PDStats, model: str) -> str:
    """``/metrics`` of a PD worker: ``engine_type`` relabelled, the PD families set or appended.

    A PD queue gauge the base text already has (0.5.23 exposes them on every server) gets this
    worker's value instead of a second copy.
    """
    text = text.replace('engine_type="unified"', f'engine_type="{mode}"')
    sched = dict(engine_type=mode, model_name=model, moe_ep_rank="0", pp_rank="0", tp_rank="0")
    present = set()
    for name, _ in QUEUE_GAUGES:
        pattern = re.compile(rf"^(sglang:{name}\{{[^}}]*\}}) .*$", re.M)
        if pattern.search(text):
            text = pattern.sub(rf"\1 {float(stats.queues[name])!r}", text)
            present.add(name)
    return text.rstrip("\n") + "\n" + render(stats, sched, skip=frozenset(present))
