"""Could the cluster ever hold a placement group? The arithmetic, per Ray strategy, from the nodes' totals.

A placement group of ``count`` equal bundles is feasible when (Ray's own rules, ``ray.util.placement_group``):

- ``STRICT_PACK``: one node holds every bundle;
- ``STRICT_SPREAD``: ``count`` distinct nodes each hold one bundle;
- ``PACK`` and ``SPREAD``: the nodes together hold ``count`` bundles, each bundle on one node (so a node
  holds as many whole bundles as its smallest resource allows).

The answer comes from the totals the GCS reports (``ray.nodes()``), not from what is free now: a
placement that fits the totals but is held by others is Ray's to wait for (``placement.reserve``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pytest_sglang.server.ray.cluster import RayNode

__all__ = ["amount", "why_unfit"]

#: Ray counts resources in 1/10000 units: a node of CPU 2 holds 2 bundles of CPU 0.66667... exactly.
_GRAIN = 1e-4
_SHOWN_NODES = 4


def amount(value: float) -> str:
    return f"{value:g}"


def _plural(count: float, word: str) -> str:
    return f"{amount(count)} {word}" + ("" if count == 1 else "s")


def _resources(ask: Mapping[str, float], times: int = 1) -> str:
    return ", ".join(f"{name} {amount(value * times)}" for name, value in ask.items())


def why_unfit(bundle: Mapping[str, float], count: int, strategy: str, alive: Sequence[RayNode],
              arithmetic: str) -> str | None:
    """Why no alive node set could ever hold ``count`` bundles with ``strategy`` (None: it could).

    ``arithmetic`` says where the bundle's GPU count comes from ("tp 4 x pp 2 x dp 1 / nnodes 1").
    """
    if not alive:
        return "the cluster has no alive node"
    problem = _one_bundle(bundle, alive, arithmetic)
    if problem is not None or count <= 1:
        return problem
    room = {node.node_id: _room(bundle, node.resources) for node in alive}
    if strategy == "STRICT_PACK":
        return _strict_pack(bundle, count, alive, room)
    if strategy == "STRICT_SPREAD":
        fitting = [node for node in alive if room[node.node_id] >= 1]
        if len(fitting) >= count:
            return None
        return (f"STRICT_SPREAD puts each bundle on its own node, so it needs {count} nodes that each have "
                f"{{{_resources(bundle)}}}; the cluster has {len(fitting)} ({_where(fitting)})")
    return _pack_or_spread(bundle, count, strategy, alive, room)


def _one_bundle(bundle: Mapping[str, float], alive: Sequence[RayNode], arithmetic: str) -> str | None:
    """A single bundle no node could hold: the resource that does not fit, and the node that has the most."""
    gpus = bundle.get("GPU", 0.0)
    biggest = max(alive, key=lambda node: node.gpus)
    if gpus > biggest.gpus:
        return (f"it needs {_plural(gpus, 'GPU')} per node ({arithmetic}); the largest node, "
                f"{biggest.describe()}, has {_plural(biggest.gpus, 'GPU')}")
    for name, value in bundle.items():
        best = max(alive, key=lambda node: node.resources.get(name, 0.0))
        has = best.resources.get(name, 0.0)
        if value > has + _GRAIN:
            return (f"it needs {name} {amount(value)} per server; no alive node has that much "
                    f"(the most is {amount(has)}, on {best.describe()})")
    if not any(_room(bundle, node.resources) for node in alive):
        return f"no single node has all of {{{_resources(bundle)}}} (each resource alone fits somewhere)"
    return None


def _strict_pack(bundle: Mapping[str, float], count: int, alive: Sequence[RayNode],
                 room: Mapping[str, int]) -> str | None:
    best = max(alive, key=lambda node: room[node.node_id])
    if room[best.node_id] >= count:
        return None
    has = ", ".join(f"{name} {amount(best.resources.get(name, 0.0))}" for name in bundle)
    return (f"STRICT_PACK puts every bundle on one node, so it needs {{{_resources(bundle, count)}}} on one node; "
            f"the largest, {best.describe()}, has {{{has}}} (room for {_plural(room[best.node_id], 'bundle')})")


def _pack_or_spread(bundle: Mapping[str, float], count: int, strategy: str, alive: Sequence[RayNode],
                    room: Mapping[str, int]) -> str | None:
    total_room = sum(room.values())
    if total_room >= count:
        return None
    totals = ", ".join(f"{name} {amount(sum(node.resources.get(name, 0.0) for node in alive))}" for name in bundle)
    per_node = "; ".join(f"{node.describe()}: {room[node.node_id]}" for node in alive[:_SHOWN_NODES])
    more = f"; {len(alive) - _SHOWN_NODES} more nodes" if len(alive) > _SHOWN_NODES else ""
    return (f"{strategy} may use any nodes, but each bundle lies on one node: it needs {{{_resources(bundle, count)}}} "
            f"in all; the cluster has {_plural(len(alive), 'alive node')} with {{{totals}}} in all, room for "
            f"{_plural(total_room, 'bundle')} ({per_node}{more})")


def _room(bundle: Mapping[str, float], have: Mapping[str, float]) -> int:
    """How many whole bundles fit in ``have`` (the node's totals)."""
    fits = [math.floor((have.get(name, 0.0) + _GRAIN) / value) for name, value in bundle.items() if value > 0]
    return max(0, min(fits)) if fits else 0


def _where(nodes: Sequence[RayNode]) -> str:
    shown = ", ".join(node.describe() for node in nodes[:_SHOWN_NODES])
    more = f", {len(nodes) - _SHOWN_NODES} more" if len(nodes) > _SHOWN_NODES else ""
    return (shown + more) or "none"
