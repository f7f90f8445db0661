"""Reach a Ray cluster (or start a local one) within one deadline, list its nodes, sweep leftovers.

``connect("auto")`` uses ``RAY_ADDRESS`` when set, else starts a local Ray for this run that
:meth:`RayCluster.close` stops; any other address is an existing cluster that ``close`` only
disconnects from. An address that cannot be reached is a :class:`LaunchConfigError` naming
``ray_address`` (credentials masked) with the fix, never Ray's traceback.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pytest_sglang import redaction
from pytest_sglang.errors import LaunchConfigError
from pytest_sglang.server.options.ray import DEFAULT_CONNECT_TIMEOUT_S, OWNER, RayAddress, parse_address
from pytest_sglang.server.ray.node_process import sweep_task

__all__ = ["NAMESPACE", "RayCluster", "RayNode", "connect", "ray_nodes"]

#: The Ray namespace of everything this plugin creates (actors, placement groups).
NAMESPACE = "pytest-sglang"
_SWEEP_TIMEOUT_S = 15.0
#: Resources every node has that are not "custom": the rest are user-declared (node_b, accelerator_type:...).
_STANDARD = ("CPU", "GPU", "memory", "object_store_memory")


@dataclass(frozen=True)
class RayNode:
    """One node of the cluster as Ray's GCS reports it (``memory_bytes``: Ray's schedulable memory)."""

    node_id: str
    address: str
    cpus: float
    gpus: float
    memory_bytes: int
    alive: bool
    custom: tuple[tuple[str, float], ...] = ()

    @property
    def resources(self) -> dict[str, float]:
        """Every schedulable resource of the node, by Ray's names (CPU, GPU, custom ones)."""
        return {"CPU": self.cpus, "GPU": self.gpus, **dict(self.custom)}

    def describe(self) -> str:
        return f"{self.address} (node {self.node_id[:8]})"


class RayCluster:
    """A connection to a Ray cluster; :meth:`close` undoes exactly what :func:`connect` did."""

    def __init__(self, address: RayAddress, *, started: bool, owns_connection: bool,
                 keeper: threading.Event | None = None) -> None:
        """Built by :func:`connect`."""
        self.address = address
        self.started = started  # this run started the cluster (a local Ray): close() stops it
        self.owns_connection = owns_connection  # connect() called ray.init: close() disconnects
        self._keeper = keeper  # releases the thread that ran ray.init (see _init)
        self.swept: list[str] = []
        self._closed = False

    def nodes(self) -> list[RayNode]:
        """Every node the GCS knows, alive or not."""
        return [_node(entry) for entry in ray_nodes()]

    def alive_nodes(self) -> list[RayNode]:
        return [node for node in self.nodes() if node.alive]

    def sweep(self, timeout_s: float = _SWEEP_TIMEOUT_S) -> list[str]:
        """Run :func:`node_process.sweep` on every alive node; what was stopped (and which nodes did not answer)."""
        refs = {node.describe(): sweep_task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)).remote(5.0)
            for node in self.alive_nodes()}
        deadline = time.monotonic() + timeout_s
        out: list[str] = []
        for where, ref in refs.items():
            try:
                out += [f"{line} on node {where}" for line in ray.get(ref, timeout=_left(deadline))]
            except (ray.exceptions.RayError, TimeoutError) as exc:
                ray.cancel(ref, force=True)
                out.append(f"could not sweep node {where}: {type(exc).__name__}")
        return out

    def close(self) -> None:
        """Stop the local Ray this run started, or disconnect from an external one; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.owns_connection and ray.is_initialized():
            ray.shutdown()  # stops the processes of a cluster this driver started, else disconnects
        if self._keeper is not None:
            self._keeper.set()

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayCluster({self.address.describe()}, started={self.started})"


def connect(address: str = "auto", *, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S, sweep: bool = True) -> RayCluster:
    """Connect to ``address`` (see the module docstring) within ``timeout_s``, then sweep leftovers."""
    parsed = parse_address(address, env_address=os.environ.get("RAY_ADDRESS"))
    deadline = time.monotonic() + timeout_s
    if parsed.kind != "local":
        _probe(parsed, deadline, timeout_s)
    cluster = _reuse(parsed)
    if cluster is None:
        keeper = _init(parsed, deadline, timeout_s)
        cluster = RayCluster(parsed, started=parsed.kind == "local", owns_connection=True, keeper=keeper)
    if sweep:
        try:
            cluster.swept = cluster.sweep(max(1.0, _left(deadline)))
        except BaseException:
            cluster.close()
            raise
    return cluster


def _reuse(parsed: RayAddress) -> RayCluster | None:
    """This process is already connected (the user's own ``ray.init``): use it if it is the same cluster."""
    if not ray.is_initialized():
        return None
    current = ray.get_runtime_context().gcs_address
    if parsed.kind == "local" or parsed.target == current or parsed.kind == "client":
        return RayCluster(parsed, started=False, owns_connection=False)
    raise LaunchConfigError(
        OWNER, "ray_address", parsed.shown,
        f"this process is already connected to the Ray cluster at {current}, and one process joins one cluster",
        "give {name} " + current + " (or auto), or call ray.shutdown() first")


def _probe(parsed: RayAddress, deadline: float, timeout_s: float) -> None:
    """A TCP connect first: a wrong host or port fails in a second, with the OS's reason."""
    try:
        with socket.create_connection((parsed.host, parsed.port), timeout=max(0.1, min(5.0, _left(deadline)))):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise _unreachable(parsed, f"nothing answers at {parsed.host}:{parsed.port} ({reason})", timeout_s)


def _init(parsed: RayAddress, deadline: float, timeout_s: float) -> threading.Event:
    """``ray.init`` on a helper thread, waited for until the deadline (Ray's own retries can take minutes).

    The thread also keeps Ray from replacing the main thread's SIGTERM handler (``sys.exit``): pytest's
    handler stops the servers first (``server/cleanup.py``). It then stays parked until the returned
    event is set: Ray starts a local cluster's GCS and raylet with ``PR_SET_PDEATHSIG`` tied to the
    starting *thread*, so they would die the moment it ended (a daemon thread still ends with pytest,
    and the local Ray with it).
    """
    errors: list[BaseException] = []
    done = threading.Event()
    keeper = threading.Event()

    def init() -> None:
        try:
            if parsed.kind == "client":  # Ray Client forwards every non-default keyword: only what it knows
                ray.init(address=parsed.target, namespace=NAMESPACE)
            elif parsed.kind == "gcs":
                ray.init(address=parsed.target, namespace=NAMESPACE, log_to_driver=False,
                         logging_level=logging.ERROR)
            else:  # "local": a new Ray (None would join the machine's latest one); no dashboard (seconds, memory)
                ray.init(address="local", namespace=NAMESPACE, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
        except BaseException as exc:  # handed to the caller's thread below
            errors.append(exc)
            done.set()
            return
        done.set()
        keeper.wait()

    threading.Thread(target=init, name="pytest-sglang-ray-init", daemon=True).start()
    if not done.wait(_left(deadline)):
        raise _unreachable(parsed, f"Ray did not connect within {timeout_s:g} s", timeout_s)
    if errors:
        exc = errors[0]
        first = redaction.mask(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        raise _unreachable(parsed, f"Ray refused: {type(exc).__name__}: {first}"[:300], timeout_s) from None
    return keeper


def _unreachable(parsed: RayAddress, problem: str, timeout_s: float) -> LaunchConfigError:
    if parsed.kind == "local":
        fix = "check that this host can run Ray (`ray start --head` shows why), or give {name} a running cluster"
    else:
        port = "10001 (Ray Client server)" if parsed.kind == "client" else "6379 (GCS)"
        fix = (f"start the cluster (`ray start --head`), check the host and port (default {port}) and the "
               "firewall, or give {name} auto for a local Ray; raise ray_connect_timeout_s if the head is slow")
    return LaunchConfigError(OWNER, "ray_address", parsed.shown, f"cannot reach the cluster: {problem}", fix)


def ray_nodes() -> list[dict[str, object]]:
    """``ray.nodes()``: one dict per node the GCS knows (NodeID, NodeManagerAddress, Alive, Resources)."""
    return list(ray.nodes())  # type: ignore[no-untyped-call]  # untyped in Ray 2.60


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _node(entry: dict[str, object]) -> RayNode:
    resources = entry.get("Resources")
    res = {str(k): float(v) for k, v in resources.items()} if isinstance(resources, dict) else {}
    custom = tuple(sorted((k, v) for k, v in res.items() if k not in _STANDARD and not k.startswith("node:")))
    return RayNode(node_id=str(entry.get("NodeID", "")), address=str(entry.get("NodeManagerAddress", "")),
                   cpus=res.get("CPU", 0.0), gpus=res.get("GPU", 0.0), memory_bytes=int(res.get("memory", 0.0)),
                   alive=bool(entry.get("Alive")), custom=custom)
