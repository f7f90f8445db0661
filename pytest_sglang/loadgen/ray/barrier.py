"""The start line of a load spread over Ray nodes (:mod:`.ray_nodes`): a small actor the shards meet at.

Every shard says where it runs (:meth:`StartBarrier.hello`), builds its client and prompts, then waits in
:meth:`StartBarrier.arrive`; the last arrival releases them all, each with the seconds left until the
load's deadline, read on this actor's clock (one clock: no two hosts' clocks are compared). Shards also
report their progress here, and the driver reads it all with :meth:`StartBarrier.state`.

Imports ray: import it only where ``LoadSpec.nodes > 1`` is dispatched (ray is an optional extra).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import ray


@dataclass(frozen=True)
class BarrierState:
    arrived: list[int]
    #: Requests finished so far, over all shards (as last reported).
    done: int
    #: Shard -> (node id, pid), as each shard said when it started.
    places: dict[int, tuple[str, int]]


class StartBarrier:
    """The shards' start line: released when all ``parties`` have arrived, or never (then the driver fails).

    A threaded actor (a thread per waiting shard), not an async one: Ray types the calls of plain methods.
    """

    def __init__(self, parties: int, left_s: float, timeout_s: float) -> None:
        self.parties = parties
        self.deadline = time.monotonic() + left_s
        self.give_up = time.monotonic() + timeout_s
        self.arrived: set[int] = set()
        self.done: dict[int, int] = {}
        self.places: dict[int, tuple[str, int]] = {}
        self.lock = threading.Lock()
        self.go = threading.Event()

    @ray.method
    def arrive(self, shard: int) -> float | None:
        """Wait for every shard; return the seconds left until the load's deadline (None: not released)."""
        with self.lock:
            self.arrived.add(shard)
            if len(self.arrived) == self.parties:
                self.go.set()
        if not self.go.wait(max(0.0, self.give_up - time.monotonic())):
            return None
        return self.deadline - time.monotonic()

    @ray.method
    def hello(self, shard: int, node_id: str, pid: int) -> None:
        """A shard has started (before it builds anything): where it runs, for messages and clean-up."""
        with self.lock:
            self.places[shard] = (node_id, pid)

    @ray.method
    def tick(self, shard: int, done: int) -> None:
        self.done[shard] = done

    @ray.method
    def state(self) -> BarrierState:
        with self.lock:
            return BarrierState(sorted(self.arrived), sum(self.done.values()), dict(self.places))
