"""What a server asks of Ray, whether the cluster could ever give it, and reserving it in time.

A server process needs ``tp x pp x dp / nnodes`` GPUs on its node (none with ``--device cpu``),
``ray_cpus`` CPUs and any custom resources (``ray_resources``). :func:`plan` refuses, before
anything starts, a placement the cluster could never hold (per strategy, from the nodes' totals:
:mod:`.fit`), with the arithmetic; :func:`reserve`
holds the resources with a placement group (one bundle per server process) and waits for it until
the caller's deadline (an absolute ``time.monotonic()``). A placement group is removed on every
path out of :func:`reserve` but success, and by :meth:`Reservation.release` after it.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group

from pytest_sglang.errors import PreflightError, ServerNotReady
from pytest_sglang.server.options.ray import DEFAULT_CPUS, DEFAULT_STRATEGY
from pytest_sglang.server.ray.cluster import RayNode, ray_nodes
from pytest_sglang.server.ray.fit import amount as _amount
from pytest_sglang.server.ray.fit import why_unfit
from pytest_sglang.sglang.args import LaunchArgs

__all__ = ["PlacementPlan", "PlacementRefused", "PlacementTimeout", "Reservation", "ServerResources", "plan",
           "reserve", "server_resources"]

#: The phase named by :class:`PlacementTimeout` (what the start was doing when the deadline passed).
PLACEMENT_PHASE = "waiting for Ray to place the server"
_SHOWN_NODES = 8


class PlacementRefused(PreflightError):
    """No alive node could ever hold the server: refused before anything was reserved or started."""


class PlacementTimeout(ServerNotReady):
    """Ray did not place the server before the deadline (its placement group was removed)."""

    phase = PLACEMENT_PHASE


@dataclass(frozen=True)
class ServerResources:
    """One server process's bundle, and where its GPU count comes from."""

    gpus: int
    cpus: float
    custom: tuple[tuple[str, float], ...] = ()
    arithmetic: str = ""  # "tp 4 x pp 2 x dp 1 / nnodes 1", or "--device cpu"

    def bundle(self) -> dict[str, float]:
        """The placement-group bundle, by Ray's resource names."""
        out = {"CPU": self.cpus, **dict(self.custom)}
        if self.gpus:
            out["GPU"] = float(self.gpus)
        return out

    def describe(self) -> str:
        return ", ".join(f"{name} {_amount(amount)}" for name, amount in self.bundle().items())


def server_resources(args: LaunchArgs, *, cpus: float = DEFAULT_CPUS,
                     custom: Sequence[tuple[str, float]] = (), simulated_gpus: bool = False) -> ServerResources:
    """The bundle of one server process of ``args`` (per node: a multi-node server divides its GPUs).

    ``simulated_gpus``: the simulator's GPUs exist only in its profile, and the cluster declares none,
    so the bundle asks for CPUs only (a cluster that declares GPUs places simulators by them too).
    """
    if (args.device or "").lower() == "cpu":
        return ServerResources(gpus=0, cpus=cpus, custom=tuple(custom), arithmetic="--device cpu")
    if simulated_gpus:
        return ServerResources(gpus=0, cpus=cpus, custom=tuple(custom),
                               arithmetic="simulated GPUs: the cluster declares none")
    ranks = args.tp_size * args.pp_size * args.dp_size
    nnodes = max(1, args.nnodes)
    arithmetic = f"tp {args.tp_size} x pp {args.pp_size} x dp {args.dp_size} / nnodes {nnodes}"
    return ServerResources(gpus=math.ceil(ranks / nnodes), cpus=cpus, custom=tuple(custom), arithmetic=arithmetic)


@dataclass(frozen=True)
class PlacementPlan:
    """``count`` bundles of ``server`` with a Ray strategy, checked against the cluster's nodes."""

    server: ServerResources
    count: int = 1
    strategy: str = DEFAULT_STRATEGY

    def bundles(self) -> list[dict[str, float]]:
        return [self.server.bundle() for _ in range(self.count)]

    def describe(self) -> str:
        what = "1 bundle" if self.count == 1 else f"{self.count} bundles"
        return f"{what} of {{{self.server.describe()}}} (strategy {self.strategy})"


def plan(args: LaunchArgs, nodes: Sequence[RayNode], *, strategy: str = DEFAULT_STRATEGY, cpus: float = DEFAULT_CPUS,
         custom: Sequence[tuple[str, float]] = (), count: int = 1, simulator: bool = False) -> PlacementPlan:
    """The placement of ``count`` servers of ``args``; :class:`PlacementRefused` if the cluster never could hold it.

    ``simulator``: the servers are simulators, whose bundles ask for GPUs only where the cluster declares some.
    """
    simulated = simulator and not any(node.gpus for node in nodes if node.alive)
    # ``strategy`` was checked where it was given (RayOptions): one of Ray's names.
    result = PlacementPlan(server_resources(args, cpus=cpus, custom=custom, simulated_gpus=simulated), count=count,
                           strategy=strategy)
    problem = why_unfit(result.server.bundle(), count, strategy, [node for node in nodes if node.alive],
                        result.server.arithmetic)
    if problem is not None:
        what = "this server" if count == 1 else f"{result.describe()}"
        raise PlacementRefused(f"Ray cannot place {what}: {problem}. Nothing was started.",
                               fix=_refusal_fix(result))
    return result


def _refusal_fix(plan: PlacementPlan) -> str:
    fewer = "start fewer servers at once, " if plan.count > 1 else ""
    strategy = {"STRICT_PACK": "use strategy PACK (bundles may then span nodes), ",
                "STRICT_SPREAD": "use strategy SPREAD or PACK (bundles may then share a node), "}.get(plan.strategy, "")
    return (f"{fewer}{strategy}lower tp/pp/dp (or spread the server with --nnodes) in the launch args, ask for "
            "less (ray_cpus, ray_resources), or give the cluster more: add a node that has "
            f"{{{plan.server.describe()}}}, or start Ray with more logical CPUs than cores "
            "(`ray start --head --num-cpus N`) when the servers need less than a core each")


@dataclass
class Reservation:
    """A ready placement group of ``plan.count`` bundles, one per server.

    Each server takes a bundle (:meth:`take`) and gives it back (:meth:`give_back`); the group is
    removed when every bundle was taken and given back, or at once by :meth:`release` (idempotent).
    A fleet's workers share one group, so Ray's strategy (SPREAD, STRICT_SPREAD...) spreads them.
    """

    group: PlacementGroup
    plan: PlacementPlan
    _released: bool = field(default=False, repr=False)
    _taken: int = field(default=0, repr=False)
    _held: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def group_id(self) -> str:
        return str(self.group.id.hex())

    def take(self) -> int:
        """The index of the next free bundle (ValueError when all are taken)."""
        with self._lock:
            if self._taken >= self.plan.count or self._released:
                raise ValueError(f"every bundle of placement group {self.group_id} is taken")
            self._taken += 1
            self._held += 1
            return self._taken - 1

    def give_back(self) -> None:
        """A server's bundle is free again; the last one back removes the group."""
        with self._lock:
            self._held -= 1
            done = self._held <= 0 and self._taken >= self.plan.count
        if done:
            self.release()

    def release(self) -> None:
        """Remove the group now (its servers' actors die with it)."""
        with self._lock:
            if self._released:
                return
            self._released = True
        _remove(self.group)


def reserve(plan: PlacementPlan, deadline: float) -> Reservation:
    """Create the placement group of ``plan`` and wait for it until ``deadline`` (``time.monotonic()``).

    On a timeout the group is removed and :class:`PlacementTimeout` names what was asked and what the
    nodes had free; on any other way out (Ctrl-C included) it is removed too.
    """
    now = time.monotonic()
    group = placement_group(plan.bundles(), strategy=plan.strategy, name=f"pytest-sglang-{uuid.uuid4().hex[:12]}")
    try:
        ready, _ = ray.wait([group.ready()], timeout=max(0.0, deadline - now))
    except BaseException:
        _remove(group)
        raise
    if ready:
        return Reservation(group, plan)
    _remove(group)
    waited = max(0.0, deadline - now)
    raise PlacementTimeout(f"Ray did not place the server within {waited:.1f} s: asked for {plan.describe()}.\n"
                           f"{_free_report(plan)}\n"
                           "Fix: free those resources (other servers or Ray jobs hold them: `ray status`), wait "
                           "longer (startup_timeout_s) or ask for less (tp/pp/dp, ray_cpus, ray_resources)")


def _remove(group: PlacementGroup) -> None:
    if not ray.is_initialized():
        return  # disconnected: Ray removed the job's groups with it (and would auto-start a new Ray here)
    try:
        remove_placement_group(group)
    except (ray.exceptions.RayError, ValueError):  # already removed, or the GCS is gone
        pass


def _free_report(plan: PlacementPlan) -> str:
    """What each node has free now against the bundle, and what it lacks (a placement is per node)."""
    ask = plan.server.bundle()
    per_node = _free_per_node()
    if per_node is None:  # Ray Client: only the cluster-wide view is reachable
        # Untyped in Ray 2.60.
        free: Mapping[str, float] = ray.available_resources()  # type: ignore[no-untyped-call]
        shown = ", ".join(f"{name} {_amount(float(free.get(name, 0.0)))}" for name in ask)
        return f"Free in the whole cluster now: {shown} (per-node figures need a direct GCS connection)."
    nodes = {entry["NodeID"]: str(entry["NodeManagerAddress"]) for entry in ray_nodes() if entry.get("Alive")}
    lines = []
    for node_id, free in list(per_node.items())[:_SHOWN_NODES]:
        where = f"{nodes.get(node_id, '?')} (node {node_id[:8]})"
        lacking = [f"{name} {_amount(amount - free.get(name, 0.0))} (asked {_amount(amount)}, free "
                   f"{_amount(free.get(name, 0.0))})" for name, amount in ask.items() if free.get(name, 0.0) < amount]
        lines.append(f"  {where}: missing {', '.join(lacking)}" if lacking else f"  {where}: has it free now")
    return "Free per node now (a bundle must fit on one node):\n" + "\n".join(lines)


def _free_per_node() -> dict[str, dict[str, float]] | None:
    if ray.util.client.ray.is_connected():  # type: ignore[no-untyped-call]  # untyped in Ray 2.60
        return None
    # A DeveloperAPI (Ray's own TPU utilities use it): the public API only has cluster-wide totals.
    from ray._private.state import available_resources_per_node

    raw: Mapping[str, Mapping[str, float]] = available_resources_per_node()  # type: ignore[no-untyped-call]
    return {str(node): {str(k): float(v) for k, v in res.items()} for node, res in raw.items()}
