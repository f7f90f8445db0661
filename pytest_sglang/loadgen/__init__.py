"""The load generator: ``run_load(url, LoadSpec(...)) -> LoadResult`` with SGLang bench_serving metrics.

Plain Python, usable without pytest. See docs/loadgen.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any

from pytest_sglang.loadgen import clock
from pytest_sglang.loadgen.multiproc import run_processes
from pytest_sglang.loadgen.record import RequestRecord
from pytest_sglang.loadgen.result import LoadResult
from pytest_sglang.loadgen.runner import Progress, ShardResult, run_single
from pytest_sglang.loadgen.spec import LoadSpec
from pytest_sglang.redaction import register

__all__ = ["LoadResult", "LoadSpec", "RequestRecord", "run_load"]


def run_load(
    url: str, spec: LoadSpec, *, api_key: str | None = None, progress: Progress | None = None
) -> LoadResult:
    """Run ``spec`` against the SGLang server at ``url`` and return its metrics.

    Per-request failures (HTTP errors, in-band errors, cut-off streams, wrong token counts) are
    counted in the result; :class:`~pytest_sglang.errors.LoadGenError` means the load could not run
    at all (nothing answers at ``url``, the warmup was rejected). ``progress(done, total)`` is called
    as requests finish. Safe to call from inside a running event loop (runs in a worker thread).
    """
    register(api_key)
    base = url.rstrip("/")
    if spec.processes > 1:
        shard, duration = run_processes(base, spec, api_key, progress)
    else:
        shard, duration = _run_async(run_single(base, spec, api_key, progress))
    return LoadResult.from_records(
        spec,
        shard.records,
        duration,
        url=base,
        server_view=shard.server_view,
        warmup_errors=shard.warmup_errors,
    )


def _run_async(coro: Coroutine[Any, Any, tuple[ShardResult, float]]) -> tuple[ShardResult, float]:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return clock.run(coro)
    # Called from async code (e.g. an async test): asyncio.run would refuse, so use a thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(clock.run, coro).result()
