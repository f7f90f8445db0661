"""What one soak sample reads from the server (the I/O half of :mod:`.soak_series`).

- resident memory: ``rss()`` when the caller can read it (:func:`process_tree_rss_mb` over the launched
  server's processes), else ``process_resident_memory_bytes`` in ``/metrics`` when the server exports it
  (SGLang 0.5.23 does not: its Prometheus registry is multiprocess, without a process collector);
- from ``/metrics`` (``--enable-metrics``; ``sglang:`` and ``sglang_`` spellings, summed over ranks): free
  KV tokens (``sglang:kv_available_tokens`` + ``sglang:kv_evictable_tokens``), the pool
  (``sglang:max_total_num_tokens``), running and queued requests (``sglang:num_running_reqs``,
  ``sglang:num_queue_reqs``). A /metrics that does not answer is not asked again: the reason is kept once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import httpx
import psutil

from pytest_sglang.loadgen.client.servermetrics import MAX_METRICS_BYTES, read_bounded
from pytest_sglang.loadgen.soak.series import SoakSample
from pytest_sglang.sglang import metrics_text

__all__ = ["RSS_METRIC", "Sampler", "process_tree_rss_mb"]

RSS_METRIC = "process_resident_memory_bytes"
_MB = 1_000_000
Metrics = dict[str, list[metrics_text.Sample]]


def process_tree_rss_mb(pid: int) -> float | None:
    """Resident memory of process ``pid`` and all its descendants, MB (None when it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):  # a child may exit between the listing and the read
            total += proc.memory_info().rss
    return total / _MB


async def _metrics(client: httpx.AsyncClient, timeout_s: float) -> Metrics | str:
    """``/metrics`` parsed, or why it could not be read."""
    try:
        async with client.stream("GET", "/metrics", timeout=timeout_s) as resp:
            if resp.status_code != 200:
                return f"GET /metrics answered {resp.status_code} (start SGLang with --enable-metrics)"
            text = await read_bounded(resp, MAX_METRICS_BYTES)
    except httpx.HTTPError as exc:
        return f"GET /metrics failed: {type(exc).__name__}"
    try:
        return metrics_text.parse(text)
    except ValueError:
        return "GET /metrics is not Prometheus text"


def _kv(metrics: Metrics) -> tuple[float | None, float | None]:
    available = metrics_text.value(metrics, "sglang:kv_available_tokens")
    evictable = metrics_text.value(metrics, "sglang:kv_evictable_tokens")
    free = None if available is None else available + (evictable or 0.0)
    return free, metrics_text.value(metrics, "sglang:max_total_num_tokens")


class Sampler:
    """Takes the samples of one soak; ``missing`` says why /metrics gave nothing, ``rss_source`` where RSS came from."""

    def __init__(self, client: httpx.AsyncClient, rss: Callable[[], float | None] | None, rss_source: str) -> None:
        self.client, self.rss = client, rss
        self.rss_source = rss_source if rss is not None else ""
        self.missing = ""

    async def sample(self, t: float, completed: int, in_flight: int, timeout_s: float) -> SoakSample:
        """One sample at ``t`` s; /metrics is given at most ``timeout_s`` (5 s at most)."""
        metrics: Metrics = {}
        if not self.missing:
            got = await _metrics(self.client, max(0.1, min(5.0, timeout_s)))
            if isinstance(got, str):
                self.missing = got
            else:
                metrics = got
        free, total = _kv(metrics)
        return SoakSample(round(t, 3), self._rss(metrics), free, total,
                          metrics_text.value(metrics, "sglang:num_running_reqs"),
                          metrics_text.value(metrics, "sglang:num_queue_reqs"), completed, in_flight)

    def _rss(self, metrics: Metrics) -> float | None:
        if self.rss is not None:
            return self.rss()
        value = metrics_text.value(metrics, RSS_METRIC)
        if value is not None:
            self.rss_source = f"{RSS_METRIC} in the server's /metrics"
        return None if value is None else value / _MB
