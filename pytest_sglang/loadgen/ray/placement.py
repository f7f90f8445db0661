"""Where the shards of a load spread over Ray nodes (:mod:`.ray_nodes`) may run: alive nodes, checked.

Imports ray: import it only where ``LoadSpec.nodes > 1`` is dispatched (ray is an optional extra).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import ray

from pytest_sglang.errors import ConfigError, LoadGenError

_FIX_NODES = "use fewer nodes (nodes=1 runs the load here), or connect to a cluster with enough nodes"


@dataclass(frozen=True)
class _Node:
    address: str
    hostname: str
    cpus: float


def require_ray(count: int) -> None:
    """Raise the ConfigError of ``LoadSpec.nodes`` unless this process is connected to a Ray cluster."""
    if not ray.is_initialized():
        raise ConfigError("LoadSpec.nodes", count, "spreads the load over Ray nodes, and this process is not "
                          "connected to a Ray cluster (ray.is_initialized() is False)",
                          "call ray.init(address='auto') (or ray.init(address=...)) before the load, or use nodes=1")


def alive_nodes(count: int) -> list[str]:
    """Ids of ``count`` distinct alive Ray nodes with a CPU; other nodes first, the driver's own last.

    The driver runs the warmup and the merge (and, under pytest, the tests): its node takes a shard only
    when there are not enough others.
    """
    require_ray(count)
    nodes = {n: node for n, node in _alive().items() if node.cpus >= 1}
    if len(nodes) < count:
        raise ConfigError("LoadSpec.nodes", count, f"the Ray cluster has {len(nodes)} alive node(s) with a CPU: "
                          f"{_listed(nodes)}", _FIX_NODES)
    mine = ray.get_runtime_context().get_node_id()
    ordered = sorted(nodes, key=lambda n: (n == mine, nodes[n].address, n))
    return ordered[:count]


def check_nodes(url: str, node_ids: Sequence[str]) -> dict[str, str]:
    """Each node's address; refuses repeated, unknown or dead nodes, and a loopback URL for other hosts."""
    if not node_ids or len(set(node_ids)) != len(node_ids):
        raise ConfigError("LoadSpec.nodes", len(node_ids), f"needs distinct Ray node ids, got {list(node_ids)}",
                          "give each node once (alive_nodes(n) picks n distinct alive nodes)")
    alive = _alive()
    gone = [n for n in node_ids if n not in alive]
    if gone:
        raise ConfigError("LoadSpec.nodes", len(node_ids), f"Ray node(s) {', '.join(gone)} are not alive; the "
                          f"cluster has {len(alive)} alive: {_listed(alive)}", _FIX_NODES)
    mine = alive[ray.get_runtime_context().get_node_id()].address
    elsewhere = sorted({alive[n].address for n in node_ids} - {mine})
    if _loopback(url) and elsewhere:
        raise LoadGenError(f"the server URL {url} is a loopback address, but load shards would run on other "
                           f"hosts ({', '.join(elsewhere)}), where it names each host itself. Fix: give the "
                           "server's address as those nodes reach it.")
    return {n: alive[n].address for n in node_ids}


def local_nodes(node_ids: Sequence[str]) -> set[str]:
    """Those of ``node_ids`` on this machine: same address and host name as the driver's own node."""
    alive = _alive()
    mine = alive.get(ray.get_runtime_context().get_node_id())
    if mine is None:
        return set()
    here = (mine.address, mine.hostname)
    return {n for n in node_ids if n in alive and (alive[n].address, alive[n].hostname) == here}


def _alive() -> dict[str, _Node]:
    """Alive nodes of the cluster by id (``ray.nodes()`` is untyped: read into typed values here)."""
    nodes: list[dict[str, object]] = ray.nodes()  # type: ignore[no-untyped-call]
    out: dict[str, _Node] = {}
    for n in nodes:
        resources = n.get("Resources")
        cpus = resources.get("CPU", 0.0) if isinstance(resources, dict) else 0.0
        if n.get("Alive") is True:
            out[str(n["NodeID"])] = _Node(str(n.get("NodeManagerAddress", "")), str(n.get("NodeManagerHostname", "")),
                                          float(cpus))
    return out


def _listed(nodes: dict[str, _Node]) -> str:
    return ", ".join(f"{n} ({node.address})" for n, node in nodes.items()) or "none"


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it is not ours to resolve here
        return False
