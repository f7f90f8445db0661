"""Start a fleet's workers in parallel; when one fails, stop every other process of the fleet at once.

The failing worker is named in the error (index, port, how it ended, its log tail); the same happens on
Ctrl-C. ``fleet/launch.py`` plans the workers (:class:`WorkerPlan`) and starts the gateway after them.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from pytest_sglang import redaction
from pytest_sglang.errors import ServerExited, ServerStartError, SGLangError
from pytest_sglang.fleet.discovery import Role
from pytest_sglang.fleet.progress import FleetProgress
from pytest_sglang.server import cleanup
from pytest_sglang.server.base import RunningProcess
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.start import launch

__all__ = ["ABORT_GRACE_S", "WorkerPlan", "start_workers", "stop_all"]

#: Seconds between SIGTERM and SIGKILL for the other workers when a fleet start is abandoned.
ABORT_GRACE_S = 2.0


@dataclass(frozen=True)
class WorkerPlan:
    """One worker to start: its role, its own launch config, its port (and bootstrap port for prefill)."""

    index: int
    role: Role
    config: LaunchConfig
    port: int
    bootstrap_port: int | None = None

    def name(self) -> str:
        """``worker 1 (prefill, port 31001)`` for messages."""
        role = "" if self.role == "regular" else f"{self.role}, "
        return f"worker {self.index} ({role}port {self.port})"


class _Aborted(ServerStartError):
    """This worker's start was abandoned because another part of the fleet failed."""


def start_workers(plans: list[WorkerPlan], progress: FleetProgress | None) -> list[SGLangServer]:
    abort = threading.Event()
    lock = threading.Lock()
    procs: list[RunningProcess] = []

    def on_start(proc: RunningProcess) -> None:
        with lock:
            procs.append(proc)
        if abort.is_set():
            raise _Aborted("fleet start abandoned")

    def one(plan: WorkerPlan) -> SGLangServer:
        sink = progress.for_worker(plan.index, plan.port, plan.role) if progress is not None else None
        return launch(plan.config, sink, port=plan.port, on_start=on_start, preflight_done=True)

    def abandon() -> None:
        abort.set()
        with lock:
            started = list(procs)
        stop_all(started)  # the other workers' waits see their process gone and end at once

    pool = ThreadPoolExecutor(max_workers=len(plans), thread_name_prefix="sglang-fleet-worker")
    futures: list[Future[SGLangServer]] = [pool.submit(one, plan) for plan in plans]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
    except BaseException:  # Ctrl-C while waiting: stop whatever started, then let the interrupt through
        abandon()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    failed = next((i for i, f in enumerate(futures) if f.done() and f.exception() is not None), None)
    if failed is None:
        pool.shutdown(wait=True)
        return [f.result() for f in futures]
    abandon()
    pool.shutdown(wait=True, cancel_futures=True)
    stop_all([p for f in futures if not f.cancelled() and f.exception() is None
               for p in (f.result().process,) if p is not None])
    raise _worker_failed(plans[failed], futures[failed].exception(), len(plans))


def _worker_failed(plan: WorkerPlan, exc: BaseException | None, total: int) -> SGLangError:
    text = redaction.scrub(str(exc)) if exc is not None else "unknown error"
    head = (f"fleet start failed: {plan.name()}, one of {total} workers, did not start; every other process of "
            "the fleet was stopped.\n")
    if isinstance(exc, ServerExited):
        error = ServerExited(head + text)
        error.exit_status, error.phase, error.fatal_line, error.log_path = (
            exc.exit_status, exc.phase, exc.fatal_line, exc.log_path)
        return error
    if isinstance(exc, SGLangError):
        return type(exc)(head + text) if isinstance(exc, ServerStartError) else ServerStartError(head + text)
    return ServerStartError(head + f"{type(exc).__name__}: {text}")


def stop_all(procs: list[RunningProcess]) -> None:
    """Stop processes in parallel with a short grace (a fleet start is being abandoned)."""
    def stop(proc: RunningProcess) -> None:
        try:
            proc.stop(ABORT_GRACE_S)
        finally:
            cleanup.untrack(proc)

    threads = [threading.Thread(target=stop, args=(p,), daemon=True) for p in procs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
