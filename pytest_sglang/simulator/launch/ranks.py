"""One node rank of a multi-node server (``--nnodes N --node-rank K --dist-init-addr HOST:PORT``).

What SGLang 0.5.23 does, and so the simulator (file:line are in the sglang 0.5.23 wheel):

* Every node's schedulers meet in ``torch.distributed.init_process_group(init_method="tcp://ADDR")``
  (``srt/distributed/bootstrap.py:241,328``): rank 0 hosts the TCPStore on the dist-init port and
  waits ``--dist-timeout`` seconds (default: torch's 30 min for gloo, 10 min for NCCL) for every
  rank, else ``DistStoreError: Timed out after N seconds waiting for clients. j/w clients joined.``;
  a rank >= 1 retries connecting as long.
* Startup collectives keep the nodes in step: rank 0 opens no HTTP port before the others are up.
* A node rank >= 1 serves no API: once its schedulers are ready it starts a dummy health server on
  its own ``--host/--port`` (``/ping``, ``/health``, ``/health_generate`` -> 200; everything else 404;
  ``srt/utils/common.py:3624``) and ignores SIGTERM until rank 0 broadcasts its shutdown
  (``srt/entrypoints/engine.py:1234-1290``).
* A peer that dies breaks the next collective (gloo: "Connection closed by peer"): the surviving
  ranks log "Scheduler hit an exception", and their launcher kills its own process tree (SIGKILL).

The wire protocol here is the simulator's own (one text line per message), not torch's.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import BinaryIO, NoReturn

from aiohttp import web

from pytest_sglang.simulator.launch.nodes import Node
from pytest_sglang.simulator.launch.startup import SITE_PACKAGES, scheduler_exception
from pytest_sglang.simulator.logs import Logger
from pytest_sglang.sockets import free_port

JOIN, GO, READY, UP, SHUTDOWN = b"join", b"go", b"ready", b"up", b"shutdown"
#: A dead peer is noticed at the next collective, not at once: this lets a watcher see who died first.
PEER_LOSS_S = 0.2
_GLOO_CLOSED = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                "Connection closed by peer {peer}. This is typically caused by a remote worker crashing. "
                "Check the logs of the remote worker before reporting an error. GLHF!")
_RUNNING_TRACEBACK = """Traceback (most recent call last):
  File "{root}/sglang/srt/managers/scheduler.py", line 6367, in run_scheduler_process
    scheduler.run_event_loop()
  File "{root}/sglang/srt/utils/common.py", line 2715, in broadcast_pyobj
    dist.broadcast(tensor_size, src=src, group=dist_group)
  File "{root}/torch/distributed/distributed_c10d.py", line 3151, in broadcast
    work.wait()
{error}
"""


def split_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as SGLang's NetworkAddress.parse reads it."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class Rendezvous:
    """This node rank's link to the others: the rendezvous, the startup barrier, the peer watch."""

    def __init__(self, node: Node, log: Logger, time_scale: float) -> None:
        self.node = node
        self.log = log
        self.time_scale = time_scale
        self.labels: list[str] = [""]
        self.running = False  # past startup: rank 0's running-phase SIGQUIT handler applies
        self._closing = False
        self._peers: dict[int, socket.socket] = {}
        self._ready: set[int] = set()
        self._events = {GO: threading.Event(), UP: threading.Event()}
        self._lock = threading.Condition()
        # Without --dist-init-addr each node picks its own port (bootstrap.py:245): nobody ever meets.
        self.host, self.port = split_addr(node.dist_init_addr or f"127.0.0.1:{free_port()}")

    # -- startup ---------------------------------------------------------------------------------
    def join(self, labels: list[str]) -> None:
        """Startup's ``init_parallel`` hook: meet every other node rank, or die as torch would."""
        self.labels = labels or [""]
        for label in self.labels:
            self.log.info("Init parallel begin.", rank=label)
        started = time.monotonic()
        deadline = started + self.node.timeout_s
        if self.node.node_rank == 0:
            self._host(deadline)
        else:
            self._connect(deadline)
        for label in self.labels:
            self.log.info(f"Init parallel ends. elapsed={time.monotonic() - started:.2f} s", rank=label)

    def _host(self, deadline: float) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            server = socket.create_server((self.host, self.port), family=family)
        except OSError as exc:
            self._fail("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                       f"network address. port: {self.port}, useIpv6: {str(family == socket.AF_INET6).lower()}, "
                       f"code: -{exc.errno}, message: {exc.strerror}")
        with server:
            while len(self._peers) < self.node.nnodes - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    joined = len(self.labels) * (1 + len(self._peers))
                    self._fail(f"torch.distributed.DistStoreError: Timed out after {int(self.node.timeout_s) + 1} "
                               f"seconds waiting for clients. {joined}/{self.node.world_size} clients joined.")
                server.settimeout(left)
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                self._admit(conn, deadline)
        for conn in self._peers.values():
            conn.sendall(GO + b"\n")

    def _admit(self, conn: socket.socket, deadline: float) -> None:
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        stream = conn.makefile("rb")
        try:
            word, _, rank = stream.readline().strip().partition(b" ")
        except OSError:
            word, rank = b"", b""
        if word != JOIN or not rank.isdigit():
            conn.close()  # not one of ours (a port scanner, a stray client)
            return
        conn.settimeout(None)
        self._peers[int(rank)] = conn
        self._watch(int(rank), conn, stream)

    def _connect(self, deadline: float) -> None:
        while True:
            try:
                conn = socket.create_connection((self.host, self.port), timeout=1.0)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    self._fail(f"torch.distributed.DistNetworkError: The client socket has timed out after "
                               f"{int(self.node.timeout_s * 1000)}ms while trying to connect to "
                               f"({self.host}, {self.port}).")
                time.sleep(0.1)
        conn.settimeout(None)
        conn.sendall(JOIN + f" {self.node.node_rank}\n".encode())
        self._peers[0] = conn
        self._watch(0, conn, conn.makefile("rb"))
        self._wait(self._events[GO].is_set, deadline)

    def barrier(self) -> None:
        """After startup: every rank waits for the others (SGLang's startup collectives do the same)."""
        deadline = time.monotonic() + self.node.timeout_s
        if self.node.node_rank == 0:
            self._wait(lambda: len(self._ready) >= self.node.nnodes - 1, deadline)
            for conn in self._peers.values():
                conn.sendall(UP + b"\n")
            self.running = True
        else:
            self._peers[0].sendall(READY + b"\n")
            self._wait(self._events[UP].is_set, deadline)

    def _wait(self, done: Callable[[], bool], deadline: float) -> None:
        with self._lock:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
                               f"unbound_buffer.cc:81] Timed out waiting {int(self.node.timeout_s * 1000)}ms for "
                               "recv operation to complete")
                self._lock.wait(min(left, 0.5))

    def _fail(self, error: str) -> NoReturn:
        scheduler_exception(self.log, error, where="torch/distributed/distributed_c10d.py",
                            func="init_process_group", stmt="store, rank, world_size = next(rendezvous_iterator)",
                            rank=self.labels[0])

    # -- the watch -------------------------------------------------------------------------------
    def _watch(self, rank: int, conn: socket.socket, stream: BinaryIO) -> None:
        host, port = conn.getpeername()[:2]
        peer = f"[{host}]:{port}"
        threading.Thread(target=self._read, args=(rank, peer, stream), name=f"node-rank-{rank}", daemon=True).start()

    def _read(self, rank: int, peer: str, stream: BinaryIO) -> None:
        try:
            for raw in iter(stream.readline, b""):
                self._receive(rank, raw.strip())
        except OSError:
            pass  # a reset connection is a closed one
        if not self._closing:
            self._peer_lost(peer, rank)

    def _receive(self, rank: int, word: bytes) -> None:
        if word == SHUTDOWN:
            self._shutdown_follower()
        with self._lock:
            if word == READY:
                self._ready.add(rank)
            elif word in self._events:
                self._events[word].set()
            self._lock.notify_all()

    def _peer_lost(self, peer: str, rank: int) -> NoReturn:
        time.sleep(PEER_LOSS_S)
        error = _GLOO_CLOSED.format(peer=peer)
        if self.running:  # rank 0 serving: the tokenizer manager's running-phase SIGQUIT handler
            _running_phase_crash(self.log, error, self.labels[0], self.time_scale)
        scheduler_exception(self.log, error, where="torch/distributed/distributed_c10d.py", func="broadcast",
                            stmt="work.wait()", rank=self.labels[0])

    # -- shutdown --------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Rank 0 stops: broadcast the shutdown so that every other rank exits 0."""
        self._closing = True
        for conn in self._peers.values():
            try:
                conn.sendall(SHUTDOWN + b"\n")
                conn.close()
            except OSError:
                pass

    def _shutdown_follower(self) -> NoReturn:
        self._closing = True
        self.log.always(f"Scheduler or DataParallelController {os.getpid()} terminated with 0")
        self.log.info(f"kill_process_tree called: parent_pid={os.getpid()}, include_parent=False, pid={os.getpid()}")
        sys.stderr.flush()
        os._exit(0)

    # -- a rank >= 1 serves only a dummy health check ----------------------------------------------
    def serve_follower(self, host: str, port: int, enable_metrics: bool) -> int:
        """Until rank 0 shuts down (exit 0) or a peer dies (SIGKILL); SIGTERM is only logged."""
        signal.signal(signal.SIGTERM, self._ignore_sigterm)
        asyncio.run(_dummy_health_server(host, port, enable_metrics, self.log))
        return 0

    def _ignore_sigterm(self, signum: int, frame: object) -> None:
        self.log.always(f"SIGTERM received on node_rank {self.node.node_rank}; waiting for the rank-0 ShutdownReq "
                        "broadcast to stop the schedulers.")


def _running_phase_crash(log: Logger, error: str, rank: str, time_scale: float) -> NoReturn:
    """Rank 0 after startup: srt/managers/tokenizer_manager.py:4072 running_phase_sigquit_handler."""
    log.always("Scheduler hit an exception: " + _RUNNING_TRACEBACK.format(root=SITE_PACKAGES, error=error), rank=rank)
    log.always("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    log.info("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
    time.sleep(5.0 * time_scale)
    log.info(f"kill_process_tree called: parent_pid={os.getpid()}, include_parent=True, pid={os.getpid()}")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # not reached


async def _dummy_health_server(host: str, port: int, enable_metrics: bool, log: Logger) -> None:
    """srt/utils/common.py:3624 launch_dummy_health_check_server (FastAPI's 404 for everything else)."""

    async def ok(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def not_found(request: web.Request) -> web.Response:
        return web.json_response({"detail": "Not Found"}, status=404)

    app = web.Application()
    for path in ("/ping", "/health", "/health_generate"):
        app.router.add_get(path, ok)
    if enable_metrics:
        app.router.add_get("/metrics", lambda request: _metrics())
    app.router.add_route("*", "/{tail:.*}", not_found)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, port, reuse_address=True).start()
    log.info(f"Dummy health check server started in background thread at {host}:{port}")
    await asyncio.Event().wait()


async def _metrics() -> web.Response:
    return web.Response(text="", content_type="text/plain")
