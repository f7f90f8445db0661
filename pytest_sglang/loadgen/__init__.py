"""The load generator: ``run_load(url, LoadSpec(...)) -> LoadResult`` with SGLang bench_serving metrics.

Real workloads too: trace replay (``dataset="mooncake:PATH"``/``"burstgpt:PATH"``, :mod:`.replay`) and
multi-turn chat (``dataset="multiturn:..."``, :mod:`.sessions`), with the prefix-cache hit rate as SGLang
counts it (``LoadResult.cache_report``).

Plain Python, usable without pytest. See docs/loadgen.md. Memory is bounded whatever the number of
requests (prompts are built as requests start, records beyond ``LoadSpec.max_records`` are sampled),
every wait has a deadline (``request_timeout_s`` per request, ``load_timeout_s`` for the whole
load), and Ctrl-C stops the load at once, in every mode.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pytest_sglang import ledger
from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen.client import clock
from pytest_sglang.loadgen.client.vocab import resolve_vocab
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.datasets import check_trace
from pytest_sglang.loadgen.run.multiproc import run_processes
from pytest_sglang.loadgen.run.replay import run_trace
from pytest_sglang.loadgen.run.result import LoadResult
from pytest_sglang.loadgen.run.runner import Progress, ShardResult, TimedRun, run_single
from pytest_sglang.loadgen.run.sessions import run_sessions
from pytest_sglang.loadgen.shape.spec import LoadSpec, dataset_parts
from pytest_sglang.redaction import register

__all__ = ["LoadResult", "LoadSpec", "RequestRecord", "run_load"]

T = TypeVar("T")
#: Seconds the worker thread gets to unwind after Ctrl-C (its requests are cancelled first).
_UNWIND_S = 5.0


def run_load(
    url: str, spec: LoadSpec, *, api_key: str | None = None, progress: Progress | None = None
) -> LoadResult:
    """Run ``spec`` against the SGLang server at ``url`` and return its metrics.

    Per-request failures (HTTP errors, in-band errors, cut-off streams, wrong token counts,
    timeouts) are counted in the result; :class:`~pytest_sglang.errors.LoadGenError` means the load
    could not run at all (nothing answers at ``url``, the warmup was rejected). When the load's
    deadline passes, the result counts the requests in flight as timeouts and the rest as
    ``not_sent``. ``progress(done, total)`` is called as requests finish. Safe to call from inside
    a running event loop (runs in a worker thread).
    """
    register(api_key)
    base = url.rstrip("/")
    spec, vocab = resolve_vocab(base, spec, api_key)  # random ids the model has: 0.5.23 dies on others
    if spec.is_trace():
        found = check_trace(spec)  # a bad trace is an error before anything is sent
        if spec.load_timeout_s is None:  # the trace's own length bounds the load (at most MAX_LOAD_S)
            rows = spec.replace(requests=found.rows)  # the rows it has, not the most it may send
            spec = spec.replace(load_timeout_s=rows.load_timeout(span_s=found.span_s * spec.trace_time_scale))
    if spec.nodes > 1:
        shard, duration = _run_on_ray(base, spec, api_key, progress)
    elif spec.processes > 1:
        shard, duration = run_processes(base, spec, api_key, progress)
    else:
        shard, duration = _run_async(run_single(base, spec, api_key, progress, _timed(spec)))
    result = LoadResult.from_collector(
        spec,
        shard.collector,
        duration,
        url=base,
        server_view=shard.server_view,
        warmup_errors=shard.warmup_errors,
        not_sent=shard.not_sent,
        stopped=shard.stopped,
        workload={**shard.workload, **vocab},
    )
    # What the run did to the server, for the summary (shards in child processes flush too: counted here).
    ledger.note_requests(result.completed + result.failed + result.cancelled, result.total_input_tokens,
                         result.total_output_tokens)
    if spec.flush_cache:
        ledger.note_flush()
    return result


def _run_on_ray(url: str, spec: LoadSpec, api_key: str | None, progress: Progress | None) -> tuple[ShardResult, float]:
    """The load over ``spec.nodes`` Ray nodes (:mod:`.ray_nodes`), or why it cannot run here."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("LoadSpec.nodes", spec.nodes, "spreads the load over Ray nodes, and Ray is not installed",
                          "pip install 'pytest-sglang[ray]', or use nodes=1")
    # Imported here, not at the top: ray is an optional extra (and a heavy import), and this module is
    # imported by every user of the load generator.
    from pytest_sglang.loadgen.ray.nodes import run_on_ray

    return run_on_ray(url, spec, api_key, progress)


def _timed(spec: LoadSpec) -> TimedRun | None:
    """The timed run of ``spec``'s dataset: a trace replay, multi-turn sessions, or the default."""
    kind = dataset_parts(spec.dataset)[0]
    if spec.is_trace():
        return run_trace
    return run_sessions if kind == "multiturn" else None


def _run_async(coro: Coroutine[Any, Any, tuple[ShardResult, float]]) -> tuple[ShardResult, float]:
    return _run_in_thread(coro) if clock.loop_running() else clock.run(coro)


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    """Called from async code (e.g. an async test): ``asyncio.run`` would refuse, so use a thread.

    Signals reach the main thread only. A Ctrl-C there (a ``KeyboardInterrupt``, or, under
    ``asyncio.run``, a cancel of the caller's task) cancels the worker's main task, which cancels
    every request, before the interrupt goes on.
    """
    handle: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    interrupted = threading.Event()
    caller = asyncio.current_task()

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        handle.append((asyncio.get_running_loop(), task))
        if interrupted.is_set():  # Ctrl-C came before this thread got going
            coro.close()
            raise asyncio.CancelledError
        return await coro

    def stop(future: concurrent.futures.Future[T]) -> None:
        interrupted.set()
        for loop, task in handle:
            loop.call_soon_threadsafe(task.cancel)
        concurrent.futures.wait([future], timeout=_UNWIND_S)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(clock.run, main())
        try:
            while True:
                try:
                    return future.result(timeout=0.1)
                except concurrent.futures.TimeoutError:
                    if _cancelling(caller):  # asyncio.Runner turned the Ctrl-C into a cancel
                        stop(future)
                        raise asyncio.CancelledError from None
        except KeyboardInterrupt:
            stop(future)
            raise


def _cancelling(task: asyncio.Task[Any] | None) -> bool:
    if task is None or sys.version_info < (3, 11):
        return False
    return task.cancelling() > 0
