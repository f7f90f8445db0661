"""The server's own view during a load: peaks of SGLang's /metrics gauges (needs --enable-metrics).

Running and queued requests are summed over label sets (one per DP rank); token usage is the max.
"""

from __future__ import annotations

import asyncio
import re

import httpx

from pytest_sglang.sglang import metrics_text

#: Bytes of a /metrics page read (a real one is tens of KB; a hostile one could be endless).
MAX_METRICS_BYTES = 4 * 1024 * 1024
GAUGES = {"sglang:num_running_reqs": "sum", "sglang:num_queue_reqs": "sum", "sglang:token_usage": "max"}
# Counters read from each worker of a fleet before and after a load (SGLang 0.5.23 tokenizer metrics, summed
# over their label sets). Requests are counted as they finish; SGLang's own /health probes are not counted
# (log_metrics=False), so a gateway's health checks do not move them.
#: Requests each worker served (``is_streaming`` true and false).
REQUESTS_TOTAL = "sglang:num_requests_total"
#: Prompt tokens served from the prefix cache (``cache_source`` device/host/storage, or total).
CACHED_TOKENS_TOTAL = "sglang:cached_tokens_total"
#: Prompt tokens received.
PROMPT_TOKENS_TOTAL = "sglang:prompt_tokens_total"
_LINE = re.compile(r"^(sglang[:_][a-z_]+)(?:\{[^}]*\})?\s+([-+0-9.eEinfNa]+)", re.MULTILINE)


def parse_gauges(text: str) -> dict[str, float]:
    """Aggregate the gauges in :data:`GAUGES` from Prometheus text."""
    out: dict[str, float] = {}
    for spelt, raw in _LINE.findall(text):
        name = metrics_text.canonical(spelt)  # sglang_num_running_reqs is the same gauge
        how = GAUGES.get(name)
        if how is None:
            continue
        try:
            value = float(raw)
        except ValueError:  # the pattern also matches junk such as "e": skip what is not a number
            continue
        key = name.removeprefix("sglang:")
        if key not in out:
            out[key] = value
        elif how == "sum":
            out[key] += value
        else:
            out[key] = max(out[key], value)
    return out


async def read_bounded(resp: httpx.Response, limit: int) -> str:
    """At most ``limit`` bytes of a streamed response body, decoded (the rest is never read)."""
    data = b""
    if limit > 0:
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) >= limit:
                break
    return data[:limit].decode("utf-8", "replace")


class MetricsSampler:
    """Polls /metrics every ``interval_s`` while a load runs and keeps the peak of each gauge."""

    def __init__(self, client: httpx.AsyncClient, interval_s: float = 0.5) -> None:
        self.client = client
        self.interval_s = interval_s
        self.peaks: dict[str, float] = {}
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> dict[str, float]:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if not self.samples:
            return {}
        view = {f"peak_{k}": v for k, v in self.peaks.items()}
        view["samples"] = float(self.samples)
        return view

    async def _run(self) -> None:
        await asyncio.sleep(0.05)  # let the first requests reach the server
        while True:
            try:
                async with self.client.stream("GET", "/metrics", timeout=5.0) as resp:
                    if resp.status_code != 200:
                        return  # /metrics is off (404) unless the server runs with --enable-metrics
                    text = await read_bounded(resp, MAX_METRICS_BYTES)
            except httpx.HTTPError:
                return
            self.samples += 1
            for key, value in parse_gauges(text).items():
                self.peaks[key] = max(self.peaks.get(key, value), value)
            await asyncio.sleep(self.interval_s)
