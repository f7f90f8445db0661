"""Spread a load over several client processes and merge their records on one clock.

Each child builds its client, then all meet at a barrier; right after it, each child notes
``time.time()`` and ``perf_counter()`` together. Record times (perf_counter offsets) are shifted by
the child's wall-clock start minus the earliest one, so all records share the parent's timeline
(wall clocks of processes on one host agree to microseconds).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import time
from typing import Any

from pytest_sglang.errors import LoadGenError
from pytest_sglang.loadgen import clock
from pytest_sglang.loadgen.client import make_client
from pytest_sglang.loadgen.datasets import build_prompts
from pytest_sglang.loadgen.record import RequestRecord
from pytest_sglang.loadgen.runner import Progress, Shard, ShardResult, probe, run_shard, split, warmup
from pytest_sglang.loadgen.runner import flush_cache as do_flush
from pytest_sglang.loadgen.spec import LoadSpec

#: Spawned children must import the package and build a client; allow for a loaded machine.
BARRIER_TIMEOUT_S = 120.0


def _child(
    url: str,
    spec_data: dict[str, Any],
    shard: Shard,
    api_key: str | None,
    sample: bool,
    barrier: Any,
    out: Any,
    done: Any,
) -> None:
    spec = LoadSpec.from_dict(spec_data)

    async def main() -> tuple[ShardResult, float]:
        client = make_client(url, api_key=api_key, connections=shard.concurrency)
        async with client:
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait, BARRIER_TIMEOUT_S)
            wall, base = time.time(), time.perf_counter()

            def tick(_done: int, _total: int) -> None:
                with done.get_lock():
                    done.value += 1

            result = await run_shard(client, spec, shard, clock_base=base, progress=tick, sample=sample)
            return result, wall

    try:
        result, wall = clock.run(main())
        out.put(("ok", wall, [r.to_dict() for r in result.records], result.server_view))
    except BaseException as exc:  # report anything to the parent rather than dying silently
        out.put(("error", 0.0, f"{type(exc).__name__}: {exc}", {}))


def run_processes(
    url: str, spec: LoadSpec, api_key: str | None, progress: Progress | None = None
) -> tuple[ShardResult, float]:
    """Run ``spec`` over ``spec.processes`` spawned processes. Warmup and flush run here first."""

    async def prepare() -> list[str]:
        async with make_client(url, api_key=api_key, connections=spec.concurrency) as client:
            await probe(client, url)
            warm = await warmup(client, spec, url)
            if spec.flush_cache:
                await do_flush(client, url)
            return warm

    warm = clock.run(prepare())
    ctx = multiprocessing.get_context("spawn")  # fork + a parent's event loop/threads is unsafe
    shards = split(spec, build_prompts(spec), spec.processes)
    barrier = ctx.Barrier(len(shards))
    out = ctx.Queue()
    done = ctx.Value("i", 0)
    procs = [
        ctx.Process(
            target=_child,
            args=(
                url,
                spec.to_dict(),
                shard,
                api_key,
                i == 0 and spec.sample_server_metrics,
                barrier,
                out,
                done,
            ),
            daemon=True,
        )
        for i, shard in enumerate(shards)
    ]
    for p in procs:
        p.start()
    try:
        parts = _collect(out, procs, done, spec.requests, progress)
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    return _merge(parts, warm)


def _collect(
    out: Any, procs: list[Any], done: Any, total: int, progress: Progress | None
) -> list[tuple[float, list[dict[str, Any]], dict[str, float]]]:
    parts: list[tuple[float, list[dict[str, Any]], dict[str, float]]] = []
    while len(parts) < len(procs):
        try:
            status, wall, payload, view = out.get(timeout=0.2)
        except queue.Empty:
            if progress:
                progress(done.value, total)
            if not any(p.is_alive() for p in procs) and out.empty():
                raise LoadGenError(
                    "a load-generator process exited without a result. "
                    "Fix: run with processes=1 to see the error."
                ) from None
            continue
        if status != "ok":
            raise LoadGenError(
                f"a load-generator process failed: {payload}. Fix: run with processes=1 "
                "to see the error in this process."
            )
        parts.append((wall, payload, view))
    if progress:
        progress(total, total)
    return parts


def _merge(
    parts: list[tuple[float, list[dict[str, Any]], dict[str, float]]], warm: list[str]
) -> tuple[ShardResult, float]:
    t0 = min(wall for wall, _, _ in parts)
    records: list[RequestRecord] = []
    view: dict[str, float] = {}
    for wall, rows, part_view in parts:
        shift = wall - t0
        for row in rows:
            rec = RequestRecord.from_dict(row)
            rec.start += shift
            records.append(rec)
        view.update(part_view)
    end = max((r.start + r.e2e for r in records), default=0.0)
    return ShardResult(records=records, end=end, server_view=view, warmup_errors=warm), end
