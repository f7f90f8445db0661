"""The asyncio engine: arrivals (Poisson/gamma as bench_serving), concurrency cap, warmup, flush."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from pytest_sglang.errors import LoadGenError
from pytest_sglang.loadgen.client import make_client, send_request
from pytest_sglang.loadgen.datasets import Prompt, build_prompts
from pytest_sglang.loadgen.record import RequestRecord, describe_exc
from pytest_sglang.loadgen.servermetrics import MetricsSampler
from pytest_sglang.loadgen.spec import LoadSpec
from pytest_sglang.redaction import scrub

Progress = Callable[[int, int], None]
#: Warmup requests ask for at most this many tokens (as bench_serving).
WARMUP_MAX_TOKENS = 32


@dataclass
class Shard:
    """The part of a load one process runs: prompts with their global indices."""

    prompts: list[Prompt]
    indices: list[int]
    concurrency: int | None
    request_rate: float | None
    seed: int


@dataclass
class ShardResult:
    records: list[RequestRecord]
    #: Seconds from the common start to the end of the last request.
    end: float
    server_view: dict[str, float] = field(default_factory=dict)
    warmup_errors: list[str] = field(default_factory=list)


def arrival_gaps(count: int, rate: float | None, burstiness: float, seed: int) -> list[float]:
    """Inter-arrival times: gamma(shape=burstiness, scale=1/(rate*burstiness)); all 0 without a rate."""
    if rate is None:
        return [0.0] * count
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    return [rng.gammavariate(burstiness, theta) for _ in range(count)]


async def probe(client: httpx.AsyncClient, url: str) -> None:
    """Fail fast when nothing answers at ``url`` (any HTTP answer is fine here)."""
    try:
        await client.get("/health", timeout=10.0)
    except httpx.HTTPError as exc:
        raise LoadGenError(
            scrub(
                f"cannot reach the SGLang server at {url}: {describe_exc(exc)}. Fix: check the URL "
                "(host, port, http/https) and that the server is running."
            )
        ) from None


async def warmup(client: httpx.AsyncClient, spec: LoadSpec, url: str) -> list[str]:
    """Warmup requests (not timed). A 4xx answer means the load cannot run at all: LoadGenError."""
    if spec.warmup == 0:
        return []
    prompts = build_prompts(spec, spec.warmup, seed_offset=10_000)
    width = min(spec.warmup, spec.concurrency or spec.warmup)
    sem = asyncio.Semaphore(width)

    async def one(i: int, p: Prompt) -> RequestRecord:
        async with sem:
            return await send_request(
                client, spec, p, -1 - i, clock_base=0.0, output_len=min(p.output_len, WARMUP_MAX_TOKENS)
            )

    records = await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    for r in records:
        if r.error_kind and r.error_kind.startswith("http_4"):
            fix = (
                "pass the server's API key (api_key= / --api-key)"
                if r.error_kind == "http_401"
                else "check the API (--api native|chat|completions) and the fields the server rejects"
            )
            msg = f"warmup request to {url} failed: {r.error_kind}: {r.error}. Fix: {fix}."
            raise LoadGenError(scrub(msg))
    return [f"{r.error_kind}: {r.error}" for r in records if r.error_kind]


async def flush_cache(client: httpx.AsyncClient, url: str) -> None:
    resp = await client.post("/flush_cache", params={"timeout": 60}, timeout=90.0)
    if resp.status_code != 200:
        raise LoadGenError(
            scrub(
                f"POST {url}/flush_cache?timeout=60 answered {resp.status_code}: "
                f"{resp.text.strip()[:200]}. Fix: run without flush_cache, or let the "
                "server go idle first."
            )
        )


async def run_shard(
    client: httpx.AsyncClient,
    spec: LoadSpec,
    shard: Shard,
    *,
    clock_base: float,
    progress: Progress | None = None,
    sample: bool = False,
) -> ShardResult:
    """Run one shard's requests; record times relative to ``clock_base`` (a perf_counter value)."""
    sem = asyncio.Semaphore(shard.concurrency) if shard.concurrency else None
    total = len(shard.prompts)
    done = 0
    sampler = MetricsSampler(client) if sample else None
    if sampler:
        sampler.start()

    async def one(prompt: Prompt, index: int) -> RequestRecord:
        nonlocal done
        if sem is None:
            rec = await send_request(client, spec, prompt, index, clock_base=clock_base)
        else:
            async with sem:
                rec = await send_request(client, spec, prompt, index, clock_base=clock_base)
        done += 1
        if progress:
            progress(done, total)
        return rec

    tasks: list[asyncio.Task[RequestRecord]] = []
    gaps = arrival_gaps(total, shard.request_rate, spec.burstiness, shard.seed)
    for prompt, index, gap in zip(shard.prompts, shard.indices, gaps, strict=True):
        tasks.append(asyncio.ensure_future(one(prompt, index)))
        if gap:
            await asyncio.sleep(gap)
    records = list(await asyncio.gather(*tasks))
    end = max((r.start + r.e2e for r in records), default=0.0)
    view = await sampler.stop() if sampler else {}
    return ShardResult(records=records, end=end, server_view=view)


def split(spec: LoadSpec, prompts: Sequence[Prompt], parts: int) -> list[Shard]:
    """Round-robin prompts; concurrency and rate divided (a sum of Poisson streams is Poisson)."""
    shards = []
    for k in range(parts):
        idx = list(range(k, len(prompts), parts))
        conc = None
        if spec.concurrency is not None:
            conc = spec.concurrency // parts + (1 if k < spec.concurrency % parts else 0)
        rate = spec.request_rate / parts if spec.request_rate is not None else None
        shards.append(Shard([prompts[i] for i in idx], idx, conc, rate, spec.seed + 7919 * k))
    return shards


async def run_single(
    url: str, spec: LoadSpec, api_key: str | None, progress: Progress | None = None
) -> tuple[ShardResult, float]:
    """The whole load in this process: probe, warmup, flush, timed run. Returns (result, duration)."""
    prompts = build_prompts(spec)
    client = make_client(url, api_key=api_key, connections=spec.concurrency)
    async with client:
        await probe(client, url)
        warm = await warmup(client, spec, url)
        if spec.flush_cache:
            await flush_cache(client, url)
        (shard,) = split(spec, prompts, 1)
        base = time.perf_counter()
        result = await run_shard(
            client, spec, shard, clock_base=base, progress=progress, sample=spec.sample_server_metrics
        )
        duration = time.perf_counter() - base
    result.warmup_errors = warm
    return result, duration
