"""The server's own view during a load: peaks of SGLang's /metrics gauges (needs --enable-metrics).

Running and queued requests are summed over label sets (one per DP rank); token usage is the max.
The prefix cache is read two ways, as SGLang counts it: the counters ``sglang:cached_tokens_total`` /
``sglang:prompt_tokens_total`` read once before the timed run and once after (their growth is the
server's hit rate over the load), and the gauge ``sglang:cache_hit_rate``, averaged over the samples
(it holds the last prefill batch only, and SGLang's own health probes reset it, so it is corroboration).
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
#: The cache-hit gauge (hit / (hit + new) of the last prefill batch), averaged over ranks and samples.
CACHE_HIT_RATE = "sglang:cache_hit_rate"
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


def parse_cache(text: str) -> tuple[float, float, float | None]:
    """(cached tokens total, prompt tokens total, mean cache_hit_rate over ranks or None) from Prometheus text."""
    cached = prompt = 0.0
    rates: list[float] = []
    for spelt, raw in _LINE.findall(text):
        name = metrics_text.canonical(spelt)
        if name not in (CACHED_TOKENS_TOTAL, PROMPT_TOKENS_TOTAL, CACHE_HIT_RATE):
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if name == CACHED_TOKENS_TOTAL:
            cached += value
        elif name == PROMPT_TOKENS_TOTAL:
            prompt += value
        else:
            rates.append(value)
    return cached, prompt, (sum(rates) / len(rates) if rates else None)


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
        #: Counter totals (cached, prompt) before the timed run, and the gauge's samples.
        self._before: tuple[float, float] | None = None
        self._after: tuple[float, float] | None = None
        self._rate_sum, self._rate_n = 0.0, 0

    async def baseline(self) -> None:
        """Read the cache counters before the timed run (no figure when /metrics does not answer)."""
        text = await self._read()
        if text is not None:
            cached, prompt, _ = parse_cache(text)
            self._before = (cached, prompt)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> dict[str, float]:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._before is not None:
            text = await self._read()
            if text is not None:
                cached, prompt, _ = parse_cache(text)
                self._after = (cached, prompt)
        if not self.samples:
            return {}
        view = {f"peak_{k}": v for k, v in self.peaks.items()}
        view["samples"] = float(self.samples)
        return {**view, **self._cache_view()}

    def _cache_view(self) -> dict[str, float]:
        view: dict[str, float] = {}
        if self._rate_n:
            view["mean_cache_hit_rate"] = self._rate_sum / self._rate_n
        if self._before is not None and self._after is not None:
            cached, prompt = (a - b for a, b in zip(self._after, self._before, strict=True))
            view["cached_tokens"], view["prompt_tokens"] = cached, prompt
        return view

    async def _read(self) -> str | None:
        try:
            async with self.client.stream("GET", "/metrics", timeout=5.0) as resp:
                if resp.status_code != 200:
                    return None
                return await read_bounded(resp, MAX_METRICS_BYTES)
        except httpx.HTTPError:
            return None

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
            rate = parse_cache(text)[2]
            if rate is not None:
                self._rate_sum, self._rate_n = self._rate_sum + rate, self._rate_n + 1
            await asyncio.sleep(self.interval_s)
