# Over 300 lines: the fleet's two handles (WorkerHandle, SGLangFleet) side by side; the gateway part: front.py.
"""``SGLangFleet``: a gateway and one handle per worker, the same shape attached or launched.

The fleet is a handle of its own, built with its workers (never attached to a server's handle later).
It answers what :class:`~pytest_sglang.server.SGLangServer` answers (``url``, ``client()``, ``info()``,
``health()``, ``stop()``...), served by the gateway, so fixtures and gates take a :data:`Handle`.

A worker is *reachable* when this machine can talk to it directly (then ``info()``, ``health()`` and
``metrics()`` ask the worker itself); otherwise (a cluster's pod IPs, or ``--sglang-fleet-direct off``)
only the gateway's view of it (``entry``) is known and the gates fall back to that.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError, ServerUnavailable, SGLangError
from pytest_sglang.fleet.discovery import Discovery, GatewayFlavor, Readiness, WorkerEntry, discover, parse_readiness
from pytest_sglang.fleet.front import GatewayFront
from pytest_sglang.jsontypes import JSONObject
from pytest_sglang.server.base import DEFAULT_GRACE_S, ExitStatus, RunningProcess
from pytest_sglang.server.client import as_server_url, deadline_in, make_client
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.members import Handle
from pytest_sglang.sglang import metrics_text as promtext

if TYPE_CHECKING:
    from pytest_sglang.server.config import LaunchConfig

__all__ = ["Handle", "SGLangFleet", "WorkerHandle", "fleet_of"]

_MAX_METRICS_BYTES = 4 * 1024 * 1024
_READ_S = 10.0


@dataclass
class WorkerHandle:
    """One worker of the fleet: the gateway's view (``entry``) and, when reachable, the worker itself."""

    index: int
    entry: WorkerEntry
    #: The worker's own handle (None when it cannot be reached from here or direct probing is off).
    server: SGLangServer | None = None
    #: Why ``server`` is None, in words for messages ("not reachable from here: ...", "direct probing off").
    unreachable: str | None = None
    #: For a launched worker: how to start it again on the same port (``restart_worker``).
    config: LaunchConfig | None = None

    @property
    def url(self) -> str:
        """The worker's URL as the gateway lists it."""
        return self.entry.url

    @property
    def role(self) -> str:
        """``regular``, ``prefill`` or ``decode``."""
        return self.entry.role

    @property
    def reachable(self) -> bool:
        """True when this machine talks to the worker directly."""
        return self.server is not None

    @property
    def process(self) -> RunningProcess | None:
        """The launched worker's process (None when attached)."""
        return self.server.process if self.server is not None else None

    def __repr__(self) -> str:
        """One line: index, role, URL (no credentials), health and reachability; never a key."""
        state = "healthy" if self.entry.is_healthy else "unhealthy"
        where = "direct" if self.reachable else "via gateway only"
        return f"<WorkerHandle {self.index} {self.role} {_no_credentials(self.url)} {state}, {where}>"

    def label(self) -> str:
        """:meth:`name`: a record of this worker names it (the Handle protocol, server/members.py)."""
        return self.name()

    def fact(self, name: str) -> str | None:
        """What the gateway's ``GET /workers`` lists about this worker (smg 1.x labels), or None."""
        return self.entry.fact(name)

    def name(self) -> str:
        """``worker 1 (http://127.0.0.1:31001)``, ``decode worker 1 (...)`` in a prefill-decode fleet."""
        role = "" if self.role == "regular" else f"{self.role} "
        return f"{role}worker {self.index} ({self.shown_url})"

    @property
    def shown_url(self) -> str:
        """The URL for messages and reports: a gateway may list a worker with ``user:password@``."""
        return redaction.mask(self.url)

    def _direct(self) -> SGLangServer:
        if self.server is None:
            raise ServerUnavailable(f"{self.name()}: {self.unreachable or 'not reachable from here'}\n"
                                    "Fix: run the tests where the workers' addresses are reachable, or rely on "
                                    "what the gateway shows (--sglang-fleet-direct auto).")
        return self.server

    def info(self) -> dict[str, Any]:
        """The worker's own validated ``/server_info``."""
        return self._direct().info()

    def health(self) -> int:
        """The status code of the worker's own ``GET /health``."""
        return self._direct().health()

    def metrics(self, timeout_s: float | None = None) -> dict[str, list[promtext.Sample]]:
        """The worker's own ``/metrics``, parsed (``timeout_s`` bounds the read)."""
        return self._direct().metrics(timeout_s)

    def metrics_or_why(self, timeout_s: float | None = None) -> dict[str, list[promtext.Sample]] | str:
        """:meth:`metrics`, or in words why they cannot be read (a gate notes it and goes on)."""
        if self.server is None:
            return f"{self.unreachable or 'not reachable from here'}: its /metrics cannot be read"
        try:
            return self.server.metrics(timeout_s)
        except SGLangError as exc:
            return f"GET /metrics failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"

    def to_json(self) -> JSONObject:
        """The worker's row for reports (credentials in the gateway's URL masked)."""
        return {"index": self.index, "url": self.shown_url, "role": self.role, "healthy": self.entry.is_healthy,
                "reachable": self.reachable, "unreachable": self.unreachable, "model_id": self.entry.model_id}


@dataclass
class SGLangFleet(GatewayFront):
    """A gateway (``gateway``: its URL is what ``sglang_server`` serves) and its workers.

    The handle's shape it shares with a server (``url``, ``client()``, ``health()``...) comes from
    :class:`~pytest_sglang.fleet.front.GatewayFront`, written once; this class adds the workers.
    """

    gateway: SGLangServer
    flavor: GatewayFlavor
    workers: list[WorkerHandle]
    version: str | None = None
    direct: str = "auto"
    #: Launch mode: starts worker ``i`` again on its port (set by the fleet launcher).
    restarter: Callable[[WorkerHandle], SGLangServer] | None = None
    #: The gateway's own Prometheus endpoint (a separate port), when known (launched fleets).
    metrics_url: str | None = None
    #: Launch mode: sends the gateway a signal, then starts the same gateway command on the same ports.
    gateway_restarter: Callable[[int], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def launched(self) -> bool:
        """True when pytest-sglang started the workers (kill/restart allowed)."""
        return self.restarter is not None

    def __repr__(self) -> str:
        """One line: the gateway (password masked), its flavour, the workers and how many are healthy."""
        healthy = sum(w.entry.is_healthy for w in self.workers)
        return (f"<SGLangFleet {self.gateway.server_url} mode={self.mode} {self.summary()} "
                f"healthy={healthy}/{len(self.workers)}>")

    def describe(self) -> str:
        """The :func:`repr` text without its angle brackets (for messages, as a server's handle)."""
        return repr(self)[1:-1]

    def __enter__(self) -> SGLangFleet:
        """Return the fleet; leaving the block stops it."""
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop the fleet (the gateway, then every launched worker)."""
        self.stop()

    def summary(self) -> str:
        """``gateway=smg 1.13.0 workers=4`` for the header."""
        what = f"{self.flavor} {self.version}" if self.version else self.flavor
        roles = {w.role for w in self.workers}
        split = "" if roles <= {"regular"} else " (" + ", ".join(
            f"{sum(w.role == r for w in self.workers)} {r}" for r in ("prefill", "decode", "regular")
            if r in roles) + ")"
        return f"gateway={what} workers={len(self.workers)}{split}"

    def members(self) -> list[WorkerHandle]:
        """The workers (the Handle protocol, server/members.py: a gate judges each of them)."""
        return self.workers

    def reachable_workers(self) -> list[WorkerHandle]:
        """The workers this machine talks to directly."""
        return [w for w in self.workers if w.reachable]

    def info(self) -> dict[str, Any]:
        """A worker's ``/server_info`` (the first reachable one): what ``sglang_server.info()`` gives for a fleet."""
        for worker in self.workers:
            if worker.reachable:
                return worker.info()
        reasons = "; ".join(f"{w.name()}: {w.unreachable}" for w in self.workers) or "the gateway lists no worker"
        raise ServerUnavailable(f"gateway {self.gateway.server_url}: no worker is reachable from here ({reasons})\n"
                                "Fix: run where the workers are reachable, or use the gates that read the gateway.")

    def discover(self) -> Discovery:
        """The gateway's ``/workers`` now."""
        try:
            with self.gateway.client() as client:
                found = discover(client)
        except httpx.HTTPError:
            found = None
        if found is None:
            raise ServerUnavailable(f"gateway {self.gateway.server_url}: GET /workers no longer answers a worker "
                                    "list\nFix: check the gateway's health and log.")
        return found

    def readiness(self) -> Readiness:
        """The gateway's ``/readiness`` now (ServerUnavailable when the gateway does not answer)."""
        try:
            with self.gateway.client() as client:
                return parse_readiness(client.get("/readiness", extensions=deadline_in(_READ_S)))
        except httpx.HTTPError as exc:
            raise ServerUnavailable(f"gateway {self.gateway.server_url}: GET /readiness failed: "
                                    f"{type(exc).__name__}: {exc}\nFix: check that the gateway runs (its log).",
                                    ) from None

    def gateway_metrics(self) -> dict[str, list[promtext.Sample]]:
        """The gateway's own ``smg_*`` metrics (its Prometheus port); ServerUnavailable when unknown."""
        if self.metrics_url is None:
            raise ServerUnavailable(f"gateway {self.gateway.server_url}: its metrics port is not known (attached "
                                    "gateway)\nFix: launch the fleet with --sglang-workers N, or read the "
                                    "workers' metrics.")
        try:
            base = as_server_url(self.metrics_url.removesuffix("/metrics"))
            with make_client(base, None, timeout=httpx.Timeout(_READ_S, connect=2.0),
                             max_body_bytes=_MAX_METRICS_BYTES, trust_env=False) as client:
                response = client.get("/metrics", extensions=deadline_in(_READ_S))
        except (httpx.HTTPError, ServerUnavailable) as exc:
            raise ServerUnavailable(f"gateway metrics {self.metrics_url}: {type(exc).__name__}: {exc}\n"
                                    "Fix: check the gateway's log.") from None
        if response.status_code != 200:
            raise ServerUnavailable(f"gateway metrics {self.metrics_url}: status {response.status_code}, "
                                    f"{len(response.content)} bytes\nFix: check the gateway's log.")
        return promtext.parse(response.text)

    def worker(self, index: int) -> WorkerHandle:
        """Worker ``index``; an IndexError names the valid range."""
        if not 0 <= index < len(self.workers):
            raise ConfigError("worker", index, f"the fleet has workers 0..{len(self.workers) - 1}",
                              "pass an index of a listed worker")
        return self.workers[index]

    def kill_worker(self, index: int, signum: int = signal.SIGKILL) -> None:
        """Send ``signum`` to launched worker ``index`` (and every process it started)."""
        worker = self.worker(index)
        if not self.launched or worker.process is None:
            raise ConfigError("kill_worker", index, "the fleet was attached (--sglang-url): pytest-sglang did not "
                              "start its workers and never signals them", "launch the fleet with --sglang-workers N")
        worker.process.kill(signum)

    def restart_worker(self, index: int) -> WorkerHandle:
        """Start launched worker ``index`` again on its port and wait until it is ready."""
        worker = self.worker(index)
        if self.restarter is None or worker.config is None:
            raise ConfigError("restart_worker", index, "the fleet was attached (--sglang-url)",
                              "launch the fleet with --sglang-workers N")
        with self._lock:
            old = worker.server
            if old is not None:
                old.stop(grace_s=1.0)
            worker.server = self.restarter(worker)
        return worker

    def restart_gateway(self, signum: int = signal.SIGKILL) -> None:
        """Send the launched gateway ``signum``, then start it again (same argv, same ports); no wait for ready."""
        if self.gateway_restarter is None:
            raise ConfigError("restart_gateway", self.gateway.describe(), "the gateway was attached (--sglang-url): "
                              "pytest-sglang did not start it and never signals it",
                              "launch the fleet with --sglang-workers N")
        with self._lock:
            self.gateway_restarter(signum)

    def exit_statuses(self) -> dict[int, ExitStatus | None]:
        """How each launched worker ended (None while running)."""
        return {w.index: w.server.exit_status() if w.server is not None else None for w in self.workers}

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> ExitStatus | None:
        """Stop the gateway, then every launched worker (so no request reaches a dying worker); idempotent.

        Attached ones are left alone. Returns how the gateway ended (None when attached).
        """
        try:
            return self.gateway.stop(grace_s)
        finally:
            self.stop_workers(grace_s)

    def stop_workers(self, grace_s: float) -> None:
        """Stop every launched worker, in parallel (N workers must not take N grace periods)."""
        with self._lock:
            servers = [w.server for w in self.workers if w.server is not None and w.server.process is not None]
        threads = [threading.Thread(target=s.stop, args=(grace_s,), daemon=True) for s in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def _no_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part (a gateway could list a worker that way)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))




def fleet_of(server: object) -> SGLangFleet | None:
    """``server`` when it is a fleet (a gateway with its workers); None for a single server (or a fake one)."""
    return server if isinstance(server, SGLangFleet) else None
