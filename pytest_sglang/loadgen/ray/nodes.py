"""Spread a load over Ray nodes: one shard per node (and per ``processes``), records merged on one timeline.

The same shards as :mod:`.multiproc` (same split, same shard body, same merge), each run by a Ray actor
pinned to its node (``NodeAffinitySchedulingStrategy(node_id, soft=False)``). A small start-barrier actor
lets them go together: every shard builds its client and prompts and arrives; when the last one has
arrived, all are released at once, with the seconds left until the load's one deadline (measured on
the barrier's own clock, so no two hosts' clocks are compared). A shard that never arrives (its node has
no free CPU, cannot import pytest_sglang, ...) fails the run naming its node. Shards send back their
bounded :class:`~pytest_sglang.loadgen.measure.collect.Collector`, never all records. Every actor is killed
when the call ends, however it ends (result, failure, deadline, Ctrl-C).

Needs the ``ray`` extra and a Ray connection made by the caller (``ray.init(...)``). This module imports
ray at import time: import it only where ``LoadSpec.nodes > 1`` is dispatched.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psutil
import ray
from ray import ObjectRef
from ray.actor import ActorHandle, ActorProxy
from ray.exceptions import GetTimeoutError, RayActorError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pytest_sglang.errors import LoadGenError
from pytest_sglang.loadgen.ray.barrier import StartBarrier
from pytest_sglang.loadgen.ray.placement import alive_nodes, check_nodes, local_nodes, require_ray
from pytest_sglang.loadgen.run.multiproc import (
    BARRIER_TIMEOUT_S,
    ChildReport,
    Release,
    ShardJob,
    merge_reports,
    prepare,
    run_child,
    shard_jobs,
)
from pytest_sglang.loadgen.run.runner import Progress, ShardResult
from pytest_sglang.loadgen.shape.spec import LoadSpec
from pytest_sglang.server.ray import driver_log

__all__ = ["alive_nodes", "run_nodes", "run_on_ray"]

#: Seconds between two progress counts a shard sends to the barrier (one actor call each).
TICK_EVERY_S = 0.25
#: Seconds between two looks of the driver at the shards and the barrier.
POLL_S = 0.25
#: Seconds the driver waits for the actors' deaths after killing them.
STOP_GRACE_S = 5.0
#: Seconds a call to the barrier actor may take before the driver calls the barrier lost.
BARRIER_CALL_S = 30.0


@dataclass(frozen=True)
class _Outcome:
    """A shard's report, and where it ran as the shard itself saw it."""

    report: ChildReport
    node_id: str
    pid: int


class _ShardActor:
    """One shard, in its own worker process on its node."""

    @ray.method
    def run(self, job: ShardJob, barrier: ActorProxy[StartBarrier]) -> _Outcome:
        k = job.shard.first
        node = ray.get_runtime_context().get_node_id()
        barrier.hello.remote(k, node, os.getpid())
        finished = 0
        sent = time.monotonic()

        def release() -> Release:
            left = ray.get(barrier.arrive.remote(k))
            # Clocks: every shard's records are offsets from its own perf_counter() read here, when
            # the barrier let it go, and all shards are taken to have started at the same instant
            # (start 0.0 on the shared timeline); no wall clock is compared across hosts. What this
            # leaves: the spread of the release's arrival between shards (the barrier answers them
            # one after another, and each answer crosses the network and wakes a thread), i.e. the
            # difference of one-way latencies from the barrier's node plus scheduling delay:
            # typically under a millisecond on one host or one LAN, a few ms across a busy network.
            # Every record of a shard is off by its shard's share of that, in the same direction;
            # perf_counter rate differences between hosts (ppm) add microseconds per second of load.
            base = time.perf_counter()
            if left is None:
                raise LoadGenError("the start barrier gave up waiting for the other shards")
            return Release(0.0, base, left)

        def tick() -> None:
            nonlocal finished, sent
            finished += 1
            now = time.monotonic()
            if now - sent >= TICK_EVERY_S:  # progress for the driver, at most 4 actor calls a second
                sent = now
                barrier.tick.remote(k, finished)

        return _Outcome(run_child(job, release, tick), node, os.getpid())


_Barrier = ray.remote(StartBarrier)
_Shard = ray.remote(_ShardActor)


def run_on_ray(url: str, spec: LoadSpec, api_key: str | None,
               progress: Progress | None = None) -> tuple[ShardResult, float]:
    """Run ``spec`` over ``spec.nodes`` alive Ray nodes (``spec.processes`` shards each)."""
    return run_nodes(url, spec, api_key, alive_nodes(spec.nodes), progress)


def run_nodes(
    url: str,
    spec: LoadSpec,
    api_key: str | None,
    node_ids: Sequence[str],
    progress: Progress | None = None,
    *,
    barrier_timeout_s: float = BARRIER_TIMEOUT_S,
    num_cpus: float = 1.0,
) -> tuple[ShardResult, float]:
    """Run ``spec`` over the Ray nodes ``node_ids``: ``spec.processes`` shards on each, merged.

    Probe, warmup and flush run here first. Each shard is an actor needing ``num_cpus`` on its node;
    one that has not reached the start barrier ``barrier_timeout_s`` after launch fails the run
    (:class:`~pytest_sglang.errors.LoadGenError` naming its node). Returns (result, duration) as
    :func:`~pytest_sglang.loadgen.run.multiproc.run_processes`; ``result.workload["nodes"]`` says where
    each shard ran (shard, node_id, address, pid, as the shard itself saw it) and its client CPU seconds
    (``cpu_s``, from the barrier's release to its last request: near ``end_s`` means client-bound), and when
    its last request ended (``end_s``, from the release).
    """
    require_ray(len(node_ids))
    addresses = check_nodes(url, node_ids)
    deadline = time.monotonic() + spec.load_timeout()
    warm = prepare(url, spec, api_key, deadline - time.monotonic())
    jobs = shard_jobs(url, spec, api_key, len(node_ids) * spec.processes)
    # Shard k on node k % len(node_ids): the first shards land on distinct nodes.
    homes = [node_ids[k % len(node_ids)] for k in range(len(jobs))]
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    barrier = _Barrier.options(num_cpus=0, max_restarts=0, max_concurrency=len(jobs) + 4,
                               scheduling_strategy=here).remote(
        len(jobs), deadline - time.monotonic(), barrier_timeout_s + BARRIER_CALL_S)
    actors: list[ActorProxy[_ShardActor]] = []
    try:
        runs: dict[ObjectRef[_Outcome], int] = {}
        for job, node in zip(jobs, homes, strict=True):
            strategy = NodeAffinitySchedulingStrategy(node, soft=False)
            actor = _Shard.options(num_cpus=num_cpus, max_restarts=0, scheduling_strategy=strategy).remote()
            actors.append(actor)
            runs[actor.run.remote(job, barrier)] = job.shard.first
        watch = _Watch(barrier, homes, addresses, spec.requests, progress, barrier_timeout_s)
        outcomes = watch.collect(runs, deadline + barrier_timeout_s)
    finally:
        _stop(actors, barrier, local_nodes(node_ids))
    result, duration = merge_reports(spec, [o.report for _, o in outcomes], warm)
    result.workload = {"nodes": [{"shard": k, "node_id": o.node_id, "address": addresses.get(o.node_id, ""),
                                  "pid": o.pid, "cpu_s": round(o.report.cpu_s, 3), "end_s": round(o.report.end, 3)}
                                 for k, o in outcomes]}
    return result, duration


class _Watch:
    """The driver's loop: shard results as they come, the barrier's state, progress, the deadlines."""

    def __init__(self, barrier: ActorProxy[StartBarrier], homes: list[str], addresses: dict[str, str],
                 total: int, progress: Progress | None, barrier_timeout_s: float) -> None:
        self.barrier = barrier
        self.homes = homes
        self.addresses = addresses
        self.total = total
        self.progress = progress
        self.barrier_timeout_s = barrier_timeout_s
        self.launched = time.monotonic()
        self.released = False

    def collect(self, runs: dict[ObjectRef[_Outcome], int], give_up: float) -> list[tuple[int, _Outcome]]:
        """Each shard's outcome, in shard order; raises on the first failure, or at ``give_up`` (monotonic)."""
        pending = dict(runs)
        outcomes: list[tuple[int, _Outcome]] = []
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                shard = pending.pop(ref)
                outcomes.append((shard, self._outcome(shard, ref)))
            self._look()
            if pending and time.monotonic() > give_up:
                raise LoadGenError(
                    f"the load shards on {self._where(sorted(pending.values()))} did not report within "
                    f"{self.barrier_timeout_s:g} s after the load's deadline (load_timeout_s). "
                    "Fix: run with nodes=1 to see what hangs."
                )
        if self.progress:
            self.progress(self.total, self.total)
        return sorted(outcomes, key=lambda item: item[0])

    def _outcome(self, shard: int, ref: ObjectRef[_Outcome]) -> _Outcome:
        where = self._where([shard])
        try:
            outcome = ray.get(ref)
        except RayActorError as exc:  # the worker process died (killed, OOM, node lost)
            raylet = driver_log.path()  # where Ray's own lines about the death went, if routed
            seen = f"; Ray's own messages: {raylet}" if raylet is not None else ""
            raise LoadGenError(f"the load shard on {where} died: {_reason(exc)}. Fix: check that node "
                               f"(memory, `ray status`{seen}), or run with nodes=1.") from None
        except RayError as exc:
            raise LoadGenError(f"the load shard on {where} could not run: {_reason(exc)}. Fix: install "
                               "pytest-sglang[ray] (same version) on every node.") from None
        if outcome.report.error:
            raise LoadGenError(f"the load shard on {where} failed: {outcome.report.error}. Fix: run with "
                               "nodes=1 to see the error in this process.")
        return outcome

    def _look(self) -> None:
        """Fail when the barrier is overdue (naming the shards missing); pass progress on."""
        if self.released and not self.progress:
            return
        try:
            state = ray.get(self.barrier.state.remote(), timeout=BARRIER_CALL_S)
        except (RayError, GetTimeoutError) as exc:
            raise LoadGenError(f"the load's start barrier (a Ray actor) was lost: {_reason(exc)}. "
                               "Fix: check the Ray cluster (`ray status`).") from None
        self.released = self.released or len(state.arrived) == len(self.homes)
        if not self.released and time.monotonic() - self.launched > self.barrier_timeout_s:
            missing = sorted(set(range(len(self.homes))) - set(state.arrived))
            raise LoadGenError(
                f"the load shards on {self._where(missing)} did not reach the start barrier within "
                f"{self.barrier_timeout_s:g} s ({len(state.arrived)} of {len(self.homes)} arrived). Fix: check "
                "that the node has a free CPU for each shard (`ray status`) and can import pytest_sglang "
                "(install pytest-sglang[ray] on every node)."
            )
        if self.progress:
            self.progress(min(state.done, self.total), self.total)

    def _where(self, shards: list[int]) -> str:
        return "; ".join(f"Ray node {self.homes[k]} ({self.addresses[self.homes[k]]}), shard {k}" for k in shards)


def _stop(actors: list[ActorProxy[_ShardActor]], barrier: ActorProxy[StartBarrier], local: set[str]) -> None:
    """Kill every actor and wait until each is dead: nothing of the load outlives the call.

    Ray calls an actor dead once the kill is on its way; its process exits a few ms later. Shards on
    this machine (``local`` nodes) are also waited for by pid; on other hosts, Ray's word is taken.
    """
    try:  # where each shard started (its pid), before the barrier that knows it goes
        places = ray.get(barrier.state.remote(), timeout=STOP_GRACE_S).places
    except (RayError, GetTimeoutError):
        places = {}
    handles = [a for a in (*actors, barrier) if isinstance(a, ActorHandle)]
    for actor in handles:
        ray.kill(actor, no_restart=True)
    limit = time.monotonic() + STOP_GRACE_S
    while handles and time.monotonic() < limit:
        calls = {actor.__ray_ready__.remote(): actor for actor in handles}
        ready, late = ray.wait(list(calls), num_returns=len(calls), timeout=max(0.0, limit - time.monotonic()))
        handles = [calls[ref] for ref in late] + [calls[ref] for ref in ready if not _died(ref)]
        for actor in handles:  # answered after the kill (the kill was still on its way): kill again
            ray.kill(actor, no_restart=True)
    procs = []
    for node, pid in places.values():
        with contextlib.suppress(psutil.Error):  # gone already, or not ours to see
            proc = psutil.Process(pid)
            if node in local and proc.cmdline()[:1] and proc.cmdline()[0].startswith("ray::"):
                procs.append(proc)  # a Ray worker still (not a pid reused since)
    psutil.wait_procs(procs, timeout=max(0.1, limit - time.monotonic()))


def _died(ref: ObjectRef[object]) -> bool:
    try:
        ray.get(ref, timeout=0)
    except RayActorError:
        return True
    return False


def _reason(exc: BaseException) -> str:
    """Ray's explanation in one line (its messages run to a dozen lines of ids and advice)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    why = next((line for line in lines if line.startswith("The actor is dead because")), "")
    text = " ".join(x for x in (lines[0] if lines else type(exc).__name__, why) if x)
    return text if len(text) <= 400 else text[:397] + "..."
