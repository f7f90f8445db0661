"""``RayRunner``: the ``Runner`` that starts a local runner's command on a Ray node instead of here.

It places what ``ProcessRunner``/``SimulatorRunner`` would run (their ``argv`` and ``child_env``):
check the cluster could hold the server (:func:`placement.plan`), reserve a bundle, start the node
actor in it, pick the port *on that node* (``port == 0``), and have the actor start the server
listening on the node's address. One deadline covers the scheduling (and the start, for the caller).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_sglang.errors import LaunchConfigError
from pytest_sglang.server.base import nothing_reserved
from pytest_sglang.server.config import LaunchConfig, connect_host, given_port
from pytest_sglang.server.options.ray import RayOptions
from pytest_sglang.server.ranks import Rank, RankedProcess, needs_ranks, rank_configs, rank_log_path
from pytest_sglang.server.ray.cluster import RayCluster
from pytest_sglang.server.ray.placement import PlacementPlan, Reservation, plan, reserve
from pytest_sglang.server.ray.process import RayProcess
from pytest_sglang.server.ray.seat import Seat, open_seat
from pytest_sglang.server.runner import RUN_ID, ProcessRunner, SimulatorRunner, child_env
from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.hostmem import HostMemory
from pytest_sglang.sglang.masks import scrub_argv

__all__ = ["RayRunner"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


class RayRunner:
    """Starts ``inner``'s servers on the nodes of ``cluster`` (one placement group per server)."""

    def __init__(self, cluster: RayCluster, inner: ProcessRunner, options: RayOptions | None = None) -> None:
        """``options`` gives the strategy, CPUs and custom resources per server (defaults: PACK, 1 CPU)."""
        self.cluster = cluster
        self.inner = inner
        self.options = options or RayOptions()
        self.name = f"ray/{inner.name}"
        # Seats reserved by host_memory() for the start that follows (the preflight asks first).
        self._pending: dict[LaunchConfig, Seat] = {}
        # Bundles of a group reserved by place_together(), waiting for their servers' starts.
        self._claims: dict[LaunchConfig, list[Reservation]] = {}
        self._lock = threading.Lock()

    def plan(self, config: LaunchConfig, count: int = 1) -> PlacementPlan:
        """What ``count`` servers of ``config`` ask of the cluster; refused here if no node could hold one."""
        args = config.launch_args
        return plan(args, self.cluster.alive_nodes(), strategy=self.options.ray_strategy,
                    cpus=self.options.ray_cpus, custom=self.options.ray_resources, count=count,
                    simulator=isinstance(self.inner, SimulatorRunner))

    def place(self, config: LaunchConfig, deadline: float) -> Seat:
        """Reserve a bundle for one server of ``config`` and start its node actor, before ``deadline``."""
        with self._lock:
            claims = self._claims.get(config)
            claim = claims.pop(0) if claims else None
        if claim is not None:
            return open_seat(claim, RUN_ID, deadline)
        return open_seat(reserve(self.plan(config), deadline), RUN_ID, deadline)

    def place_together(self, configs: Sequence[LaunchConfig], deadline: float) -> Callable[[], None]:
        """Reserve one placement group for these servers (a fleet), so that the strategy spreads or packs them.

        Every server must fit one bundle of the first config's size (a fleet's roles share tp/pp/dp).
        Returns what gives the group back when the servers will not all start (the fleet failed).
        """
        if len(configs) < 2:
            return nothing_reserved
        reservation = reserve(self.plan(configs[0], count=len(configs)), deadline)
        with self._lock:
            for config in configs:
                self._claims.setdefault(config, []).append(reservation)

        def abandon() -> None:
            with self._lock:
                for config, claims in list(self._claims.items()):
                    self._claims[config] = [c for c in claims if c is not reservation]
            reservation.release()

        return abandon

    def start(self, config: LaunchConfig, port: int, log_path: Path, *,
              deadline: float | None = None) -> RayProcess | RankedProcess:
        """Start the server on a node; ``port == 0`` picks a free port there.

        An ``--nnodes N`` server starts one rank per bundle (:meth:`_start_ranks`). ``deadline``: the
        ``time.monotonic()`` by which it must be placed (default: ``startup_timeout_s`` from now).
        """
        if deadline is None:
            deadline = time.monotonic() + config.startup_timeout_s
        if needs_ranks(config):
            return self._start_ranks(config, port, log_path, deadline)
        with self._lock:
            seat = self._pending.pop(config, None)
        if seat is None:
            seat = self.place(config, deadline)
        try:
            return self._start_on(seat, config, port, log_path)
        except BaseException:
            seat.release()
            raise

    def _start_ranks(self, config: LaunchConfig, port: int, log_path: Path, deadline: float) -> RankedProcess:
        """One process per node rank, each in a bundle of one group.

        The strategy spreads them (STRICT_SPREAD puts each rank on its own node); ``--dist-init-addr``
        is rank 0's node and a port free there.
        """
        nnodes = config.launch_args.nnodes
        reservation = reserve(self.plan(config, count=nnodes), deadline)
        seats: list[Seat] = []
        started: list[Rank] = []
        try:
            seats = [open_seat(reservation, RUN_ID, deadline) for _ in range(nnodes)]
            lead = seats[0]
            configs = rank_configs(config, rank0_host=lead.info.address, pick_port=lambda _host: lead.free_port())
            for k, (seat, rank_config) in enumerate(zip(seats, configs, strict=True)):
                process = self._start_on(seat, rank_config, port if k == 0 else 0, rank_log_path(log_path, k))
                started.append(Rank(k, seat.node, process))
            return RankedProcess(started)
        except BaseException:
            for rank in started:  # rank 0 first, as RankedProcess.stop does
                rank.process.stop(1.0)
            for seat in seats:
                seat.release()
            reservation.release()
            raise

    def _start_on(self, seat: Seat, config: LaunchConfig, port: int, log_path: Path) -> RayProcess:
        node_config, host = _listen_on(config, seat)
        if port == 0:
            port = given_port(config.launch_args) or seat.free_port()
        argv = self.inner.argv(node_config, port)
        launch_id = uuid.uuid4().hex
        # Only what the launch adds to the environment: the node's own environment (PATH, CUDA_VISIBLE_DEVICES
        # set by Ray for the bundle's GPUs) is the base there, not this machine's.
        env = {k: v for k, v in child_env(config, launch_id).items() if os.environ.get(k) != v}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            log.write(f"# pytest-sglang {time.strftime('%Y-%m-%d %H:%M:%S')}: on Ray node {seat.node} "
                      f"({seat.reservation.plan.describe()}): {' '.join(scrub_argv(argv))}\n".encode())
        pid = seat.start(argv, env, log_path.name)
        url_host = f"[{host}]" if ":" in host else host
        return RayProcess(seat, url=f"http://{url_host}:{port}", log_path=log_path, pid=pid, launch_id=launch_id,
                          argv=argv)

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        """The memory of the node that will hold the server (reserved now, kept for :meth:`start`).

        The simulator's host is simulated (its ``--sim-*`` flags), wherever it runs.
        """
        if isinstance(self.inner, SimulatorRunner):
            return self.inner.host_memory(config)
        with self._lock:
            seat = self._pending.get(config)
        if seat is None:
            seat = self.place(config, time.monotonic() + config.startup_timeout_s)
            with self._lock:
                self._pending[config] = seat
        memory = seat.host_memory()
        return dataclasses.replace(memory, source=f"{memory.source} of Ray node {seat.node}")

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """As the inner runner says (the simulator computes it from its profile; SGLang: unknown)."""
        return self.inner.device_pool_bytes_per_rank(config, args)

    def close(self) -> None:
        """Give back the seats reserved by :meth:`host_memory` and the bundles no start used."""
        with self._lock:
            seats = list(self._pending.values())
            groups = {id(r): r for claims in self._claims.values() for r in claims}
            self._pending.clear()
            self._claims.clear()
        for seat in seats:
            seat.release()
        for group in groups.values():
            group.release()



def _listen_on(config: LaunchConfig, seat: Seat) -> tuple[LaunchConfig, str]:
    """The config the node runs (its Python, listening on the node's address) and the host to reach it at."""
    args = config.launch_args
    node = config
    if config.command is None and config.python is None:
        node = dataclasses.replace(node, python=seat.info.python)  # this machine's path may not exist there
    if not args.given("host"):
        return dataclasses.replace(node, args=(*config.args, "--host", seat.info.address)), seat.info.address
    if args.host in _LOOPBACK:
        raise LaunchConfigError(
            "LaunchConfig", "args", f"--host {args.host}",
            "a server on a Ray node that listens on loopback cannot be reached from the driver",
            "drop --host from {name} (a Ray launch listens on its node's address), or give --host 0.0.0.0")
    # A wildcard listens everywhere (reach it at the node's address); else the host the user chose.
    return node, seat.info.address if connect_host(args) == "127.0.0.1" else args.host
