"""A :class:`Seat`: a reserved placement-group bundle with the node actor started in it.

What :class:`~pytest_sglang.server.ray.process.RayProcess` owns on the driver's side; releasing the seat
kills the actor (and with it any server it started) and removes the placement group.
"""

from __future__ import annotations

import time
from typing import TypeVar

import ray
from ray import ObjectRef
from ray.actor import ActorHandle
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from pytest_sglang import redaction
from pytest_sglang.errors import ServerStartError
from pytest_sglang.server.ray.node_process import NodeInfo, NodeProcess, NodeProcessActor
from pytest_sglang.server.ray.placement import PlacementTimeout, Reservation
from pytest_sglang.sglang.hostmem import HostMemory

__all__ = ["CALL_TIMEOUT_S", "NodeProxy", "Seat", "actor_death_cause", "open_seat"]

#: Bound of one actor call that should be instant (a port, a start, a log chunk).
CALL_TIMEOUT_S = 30.0
#: What Ray types ``.remote()`` of an actor class as. Its handle's attributes are Any to mypy, so every
#: ``ObjectRef`` taken from one is annotated with what the actor method returns.
NodeProxy = ActorHandle[NodeProcess] | type[NodeProcess]
_T = TypeVar("_T")


class Seat:
    """A reserved bundle with the node actor living in it; :meth:`release` gives both back (idempotent)."""

    def __init__(self, reservation: Reservation, actor: NodeProxy, info: NodeInfo) -> None:
        """Built by :func:`open_seat`."""
        self.reservation = reservation
        self.actor = actor
        self.info = info
        self._released = False

    @property
    def node(self) -> str:
        return f"{self.info.address} (node {self.info.node_id[:8]})"

    def free_port(self) -> int:
        ref: ObjectRef[int] = self.actor.free_port.remote()
        return self._call(ref, "free_port")

    def host_memory(self) -> HostMemory:
        ref: ObjectRef[HostMemory] = self.actor.host_memory.remote()
        return self._call(ref, "host_memory")

    def start(self, argv: list[str], env: dict[str, str], log_name: str) -> int:
        ref: ObjectRef[int] = self.actor.start.remote(argv, env, log_name)
        return self._call(ref, "start")

    def _call(self, ref: ObjectRef[_T], what: str) -> _T:
        try:
            return ray.get(ref, timeout=CALL_TIMEOUT_S)
        except GetTimeoutError:
            raise ServerStartError(f"the node actor on {self.node} did not answer {what} within "
                                   f"{CALL_TIMEOUT_S:g} s") from None
        except RayTaskError as exc:  # raised inside the actor, e.g. the server's executable is missing
            cause = redaction.mask(f"{type(exc.cause).__name__}: {exc.cause}")
            raise ServerStartError(f"{what} failed on node {self.node}: {cause}") from None
        except RayActorError as exc:
            raise ServerStartError(
                f"the node actor on {self.node} died during {what}: {actor_death_cause(exc)}") from None

    def release(self) -> None:
        """Kill the actor (the server, if any, dies with it) and remove the placement group."""
        if self._released:
            return
        self._released = True
        if ray.is_initialized():  # else: Ray already reaped both, and a call would auto-start a new Ray
            try:
                ray.kill(_handle(self.actor), no_restart=True)
            except (RayError, ValueError):
                pass  # already dead
        self.reservation.give_back()


def open_seat(reservation: Reservation, run_id: str, deadline: float) -> Seat:
    """Start the node actor in the next free bundle of ``reservation``; on any failure the bundle is given back."""
    gpus = reservation.plan.server.gpus
    bundle = reservation.take()
    try:
        # The actor holds the bundle's GPUs, so Ray sets CUDA_VISIBLE_DEVICES for it and the server inherits it.
        actor = NodeProcessActor.options(
            num_gpus=gpus, scheduling_strategy=PlacementGroupSchedulingStrategy(
                reservation.group, placement_group_bundle_index=bundle)).remote(run_id)
    except BaseException:
        reservation.give_back()
        raise
    seat_info: NodeInfo | None = None
    try:
        seat_info = ray.get(actor.node_info.remote(), timeout=max(0.1, deadline - time.monotonic()))
    except GetTimeoutError:
        raise PlacementTimeout("the node actor did not start before the deadline (Ray could not start a worker "
                               "process in the reserved bundle).\nFix: check the node (`ray status`, raylet logs) "
                               "or wait longer (startup_timeout_s)") from None
    except RayActorError as exc:
        raise ServerStartError(f"the node actor died while starting: {actor_death_cause(exc)}") from None
    finally:
        if seat_info is None:  # any way out but success, Ctrl-C included
            Seat(reservation, actor, NodeInfo(node_id="", address="", python="")).release()
    return Seat(reservation, actor, seat_info)


def _handle(proxy: NodeProxy) -> ActorHandle[NodeProcess]:
    # Ray types ``.remote()`` as "handle or class" so that method calls type-check; it is always a handle.
    if not isinstance(proxy, ActorHandle):
        raise TypeError(f"not an actor handle: {proxy!r}")
    return proxy


def actor_death_cause(exc: RayActorError) -> str:
    """The reason Ray gives, in one line (its messages are long and multi-line)."""
    text = str(exc)
    for marker in ("ray.kill", "node", "OOM", "out of memory", "SIGKILL", "exit"):
        for line in text.splitlines():
            if marker in line:
                return redaction.mask(line.strip())[:200]
    return type(exc).__name__
