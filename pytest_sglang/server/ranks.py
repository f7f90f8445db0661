"""A server across nodes (``--nnodes N``): one process per node rank, all watched as one server.

SGLang 0.5.23 runs a multi-node server as N launches with the same args plus ``--node-rank K`` and
one ``--dist-init-addr HOST:PORT`` (rank 0's host; its schedulers host torch's rendezvous there). Only
rank 0 serves the API; a rank >= 1 answers ``/health`` from a dummy server once its schedulers are
up. We start every rank ourselves (not ``--use-ray``) so that a rank that dies fails the start with
its rank and node (sglang PR#20287: a non-zero rank was OOM-killed and the launcher hung).

Placement-agnostic: :func:`rank_configs` writes each rank's launch; whoever places the ranks (this
module's :class:`RankedRunner` on one machine, ``server/ray/`` across nodes) joins the started
processes into one :class:`RankedProcess` (a :class:`Rank` = node rank + node label + a
:class:`RunningProcess`).
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sglang.errors import ConfigError
from pytest_sglang.server.base import DEFAULT_GRACE_S, ExitStatus, Runner, RunningProcess, nothing_reserved, signal_name
from pytest_sglang.server.config import LaunchConfig, connect_host
from pytest_sglang.server.diagnosis import process_identity
from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.hostmem import HostMemory
from pytest_sglang.sockets import free_port

__all__ = ["Rank", "RankExit", "RankedProcess", "RankedRunner", "needs_ranks", "rank_configs", "rank_log_path"]

#: How often the ranks are checked for an end, so that the first one to end is known.
POLL_S = 0.05


def needs_ranks(config: LaunchConfig) -> bool:
    """Whether the launch spans nodes and we start its ranks (``--nnodes`` other than 1, not ``--use-ray``).

    With ``--use-ray`` SGLang starts the other ranks itself as Ray actors: that is one process to us.
    """
    args = config.launch_args
    return args.given("nnodes") and args.nnodes != 1 and not args.value("use_ray")


def rank_configs(config: LaunchConfig, *, rank0_host: str | None = None,
                 pick_port: Callable[[str], int] = free_port) -> tuple[LaunchConfig, ...]:
    """Each node rank's launch: ``config`` plus ``--node-rank K`` and the one ``--dist-init-addr``.

    A ``--dist-init-addr`` in the args is kept; otherwise it is ``rank0_host`` (default: the host rank 0
    is reached at) and ``pick_port(rank0_host)``, a port free there. A ``--port`` in the args stays on
    rank 0 only: ranks on one machine cannot share it (the caller gives the others their port).
    Raises :class:`ConfigError` naming the flag for a topology SGLang or this launch cannot run.
    """
    args = config.launch_args
    nnodes = _check(args)
    addr = args.value("dist_init_addr")
    extra: tuple[str, ...] = ()
    if isinstance(addr, str):
        _check_addr(addr)  # the user's: kept as given
    else:
        host = rank0_host or connect_host(args)
        port = pick_port(host)
        extra = ("--dist-init-addr", f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    others = tuple(config.args_without("port"))
    return tuple(dataclasses.replace(config, args=(*(config.args if k == 0 else others), *extra,
                                                   "--node-rank", str(k)))
                 for k in range(nnodes))


def _check(args: LaunchArgs) -> int:
    nnodes = args.nnodes
    if nnodes < 1:
        raise ConfigError("--nnodes", nnodes, "must be 1 or more (the number of nodes one server spans)",
                          "give --nnodes N (N >= 2, --tp-size x --pp-size divisible by N) for a multi-node server, "
                          "or drop --nnodes for a one-node server")
    if args.given("node_rank"):
        raise ConfigError("--node-rank", args.value("node_rank"),
                          f"pytest-sglang starts every node rank of an --nnodes {nnodes} server itself, each with "
                          "its own --node-rank", "drop --node-rank from the launch args (ranks 0 to "
                          f"{nnodes - 1} are added); to test a server started elsewhere, attach to its rank 0 "
                          "(start_server(url=...); in pytest --sglang-url)")
    if args.value("use_ray"):
        raise ConfigError("--use-ray", True, "SGLang then starts the other node ranks as Ray actors itself",
                          "drop --use-ray so that pytest-sglang starts and watches every node rank, or launch "
                          "with --use-ray as one server process")
    world = args.tp_size * args.pp_size
    if world % nnodes:
        raise ConfigError("--nnodes", nnodes, f"SGLang splits tp_size x pp_size ({args.tp_size} x {args.pp_size} "
                          f"= {world} ranks) evenly over the nodes, and {world} is not divisible by {nnodes}",
                          f"give --tp-size (or --pp-size) a multiple of {nnodes}, e.g. --tp-size {nnodes}")
    if args.dp_size > 1:
        raise ConfigError("--dp-size", args.dp_size, "SGLang 0.5.23 has no data-parallel replicas across nodes",
                          "drop --dp-size (attention DP across nodes is --attn-dp-size), or launch the replicas "
                          "as separate servers behind a gateway")
    return nnodes


def _check_addr(addr: str) -> None:
    host, colon, port = addr.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        example = (host if colon else addr) or "10.0.0.3"
        raise ConfigError("--dist-init-addr", addr, "not HOST:PORT (SGLang's NetworkAddress)",
                          f"give rank 0's address and a port free there, e.g. --dist-init-addr {example}:29500, "
                          "or drop it and pytest-sglang picks one")


def rank_log_path(log_path: Path, node_rank: int) -> Path:
    """Rank 0 writes the launch's own log (the one followed for phases); rank K ``<stem>-rank{K}<suffix>``."""
    return log_path if node_rank == 0 else log_path.with_name(f"{log_path.stem}-rank{node_rank}{log_path.suffix}")


@dataclass(frozen=True)
class Rank:
    """One node rank: where it runs (a node name or address, for messages) and its process."""

    node_rank: int
    node: str
    process: RunningProcess

    def name(self) -> str:
        return f"rank {self.node_rank} on node {self.node}"


@dataclass(frozen=True)
class RankExit(ExitStatus):
    """How a multi-node server ended: the first rank to end (``code``/``signal`` are its own)."""

    node_rank: int = 0
    node: str = ""
    status: ExitStatus = field(default_factory=ExitStatus)
    log_path: Path | None = None
    #: The ranks that ended with it or after it, in order: ``rank 0 on node X exited with code 1``.
    then: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"rank {self.node_rank} on node {self.node} {self.status.describe()}"
        return text + (f" (then {'; '.join(self.then)})" if self.then else "")

    def killed_by(self) -> int | None:
        return self.status.killed_by()

    def fix(self) -> str | None:
        own = self.status.fix()
        if own is not None or self.node_rank == 0:
            return own  # rank 0's own log is the one shown: its fatal line explains it
        return (f"Fix: rank {self.node_rank} on node {self.node} ended first, and the other ranks fail when one "
                f"does: read its log {self.log_path} (the log above is rank 0's). A SIGKILL there is most likely "
                "the out-of-memory killer (`dmesg -T | grep -i oom` on that node).")


class RankedProcess:
    """N node ranks as one :class:`RunningProcess`: rank 0's URL, log and pid; any rank ending ends it.

    A thread checks every rank each :data:`POLL_S` so that :meth:`exit_status` names the rank that
    ended first (the others die of it within seconds: SGLang's ranks kill their own process tree
    when a peer's connection drops). Ranks found ended in the same check are ordered non-zero rank
    first: rank 0, the rendezvous host, is the usual casualty of the others.
    """

    def __init__(self, ranks: Sequence[Rank], *, poll_s: float = POLL_S) -> None:
        """Join ``ranks`` (node ranks 0 to N-1, each once) and start watching them."""
        self.ranks = tuple(sorted(ranks, key=lambda r: r.node_rank))
        if [r.node_rank for r in self.ranks] != list(range(len(self.ranks))) or not self.ranks:
            raise ValueError(f"node ranks must be 0 to N-1, each once; got {[r.node_rank for r in ranks]}")
        lead = self.ranks[0].process
        self.url = lead.url
        self.log_path = lead.log_path
        self.pid = lead.pid
        self._ended: list[tuple[Rank, ExitStatus]] = []
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._done = threading.Event()
        threading.Thread(target=self._watch, args=(poll_s,), name="pytest-sglang-ranks", daemon=True).start()

    @property
    def log_paths(self) -> dict[int, Path]:
        """Every rank's log, by node rank (for a diagnosis that reads past rank 0's)."""
        return {r.node_rank: r.process.log_path for r in self.ranks}

    def _watch(self, poll_s: float) -> None:
        while not self._done.is_set() and self._check() < len(self.ranks):
            self._done.wait(poll_s)

    def _check(self) -> int:
        """Record newly ended ranks (non-zero ranks first within one check); return how many ended."""
        with self._lock:
            seen = {rank.node_rank for rank, _ in self._ended}
            new = [(r, s) for r in self.ranks if r.node_rank not in seen and (s := r.process.exit_status()) is not None]
            self._ended += sorted(new, key=lambda item: item[0].node_rank == 0)
            return len(self._ended)

    def exit_status(self) -> RankExit | None:
        """None while every rank runs; else the first rank that ended, naming it and its node."""
        self._check()
        with self._lock:
            if not self._ended:
                return None
            (rank, status), later = self._ended[0], self._ended[1:]
        return RankExit(code=status.code, signal=status.signal, node_rank=rank.node_rank, node=rank.node,
                        status=status, log_path=rank.process.log_path,
                        then=tuple(f"{r.name()} {s.describe()}" for r, s in later))

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> ExitStatus | None:
        """Stop rank 0, then the others together; idempotent.

        Rank 0 first: a rank >= 1 only logs SIGTERM and waits for rank 0's shutdown broadcast
        (sglang/srt/entrypoints/engine.py:1256-1270), and rank 0's graceful stop ends every rank's
        schedulers, so the others then exit 0 by themselves instead of waiting out ``grace_s``.
        """
        with self._stop_lock:
            if not self._stopped:
                self._stopped = True
                self.ranks[0].process.stop(grace_s)
                _together([functools.partial(r.process.stop, grace_s) for r in self.ranks[1:]])
                self._check()
                self._done.set()
        return self.exit_status()

    def listener_root_pid(self) -> int | None:
        """Rank 0's: it serves the HTTP port."""
        return self.ranks[0].process.listener_root_pid()

    def kill(self, signum: int) -> None:
        """Send ``signum`` to every rank (each rank's whole process tree)."""
        for rank in self.ranks:
            rank.process.kill(signum)

    def describe(self) -> str:
        """``2 node ranks: rank 0 on node a (pid 1), rank 1 on node b (pid 2, ended first: killed by SIGKILL), <how>``.

        Ends in ``, running`` or ``, <exit_status().describe()>`` as every runner's does (the diagnosis
        cuts that off for its headline, so the rank that ended first is marked before it too).
        """
        first = self.exit_status()
        parts = []
        for rank in self.ranks:
            mark = f", ended first: {_short(first.status)}" if first is not None and first.node_rank == rank.node_rank \
                else ""
            parts.append(f"{rank.name()} ({process_identity(rank.process)}{mark})")
        return f"{len(self.ranks)} node ranks: {', '.join(parts)}, {'running' if first is None else first.describe()}"


def _short(status: ExitStatus) -> str:
    """``killed by SIGKILL`` / ``exited with code 1``: the ending without its explanation."""
    signum = status.killed_by()
    return f"killed by {signal_name(signum)}" if signum is not None else status.describe()


def _together(actions: Sequence[Callable[[], object]]) -> None:
    threads = [threading.Thread(target=action, daemon=True) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class RankedRunner:
    """Starts every node rank of an ``--nnodes N`` launch on this machine with ``base`` (process/simulator).

    A :class:`Runner`: rank 0 listens on the port and writes the log the engine gives; rank K gets a
    free port and ``<log>-rank{K}.log``. Any failure while starting stops the ranks already started.
    """

    def __init__(self, base: Runner, *, node: str | None = None) -> None:
        """``node``: the label of this machine in messages (default: its host name)."""
        self.base = base
        self.name = base.name
        self.node = node or socket.gethostname()

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RankedProcess:
        configs = rank_configs(config)  # every refusal before anything starts
        host = connect_host(config.launch_args)
        ranks: list[Rank] = []
        try:
            for k, rank_config in enumerate(configs):
                rank_port = port if k == 0 else free_port(host)
                ranks.append(Rank(k, self.node, self.base.start(rank_config, rank_port, rank_log_path(log_path, k))))
            return RankedProcess(ranks)
        except BaseException:
            for rank in ranks:  # rank 0 first, as in RankedProcess.stop
                rank.process.stop(1.0)
            raise

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        return self.base.host_memory(config)

    def place_together(self, configs: Sequence[LaunchConfig], deadline: float) -> Callable[[], None]:
        """Nothing to reserve: servers start on this machine."""
        return nothing_reserved

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        return self.base.device_pool_bytes_per_rank(config, args)

