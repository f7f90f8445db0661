"""The handle's shape answered by a fleet's gateway (:class:`GatewayFront`), written once.

A fleet answers what a lone :class:`~pytest_sglang.server.SGLangServer` answers (the
:class:`~pytest_sglang.server.members.Handle` protocol): its address, key, launch, process, client,
health, metrics, log and exit are its gateway's. :class:`~pytest_sglang.fleet.SGLangFleet` takes them
from this base; what only a fleet has (workers, discovery, restarts) stays in ``fleet/handle.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from pytest_sglang.server.base import ExitStatus, RunningProcess
from pytest_sglang.server.client import MAX_BODY_BYTES
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.phases import StartupReport
from pytest_sglang.server.probe import HEALTH_PROBE_TIMEOUT_S
from pytest_sglang.server.url import ServerURL
from pytest_sglang.sglang import metrics_text as promtext
from pytest_sglang.sglang.args import LaunchArgs

if TYPE_CHECKING:
    from pytest_sglang.server.config import LaunchConfig

__all__ = ["GatewayFront"]


class GatewayFront:
    """The Handle protocol's shared members, answered by ``self.gateway`` (the fleet's dataclass field)."""

    gateway: SGLangServer

    @property
    def mode(self) -> str:
        """``attach`` or the runner that launched the workers."""
        return self.gateway.mode

    @property
    def url(self) -> str:
        """The gateway's clean base URL (what the load and the acceptance suite talk to)."""
        return self.gateway.url

    @property
    def server_url(self) -> ServerURL:
        """The gateway's parsed address (``str()`` masks a password)."""
        return self.gateway.server_url

    @property
    def api_key(self) -> str | None:
        """The key the gateway and the workers take (never printed)."""
        return self.gateway.api_key

    @property
    def validate(self) -> str:
        """How the workers' ``/server_info`` is validated."""
        return self.gateway.validate

    @property
    def config(self) -> LaunchConfig | None:
        """The workers' launch config (None when attached)."""
        return self.gateway.config

    @property
    def launch_args(self) -> LaunchArgs | None:
        """The workers' launch args (None when attached)."""
        return self.gateway.launch_args

    @property
    def process(self) -> RunningProcess | None:
        """The launched gateway's process (None when attached)."""
        return self.gateway.process

    @property
    def startup(self) -> StartupReport | None:
        """The fleet's start (workers, then the gateway), when launched."""
        return self.gateway.startup

    @property
    def log_path(self) -> Path | None:
        """The launched gateway's log file (each worker has its own: ``worker(i).server.log_path``)."""
        return self.gateway.log_path

    @property
    def initial_info(self) -> dict[str, Any] | None:
        """None: a gateway has no ``/server_info`` of its own (each worker's is read by the gates)."""
        return None

    def client(self, *, timeout: httpx.Timeout | float | None = None, headers: dict[str, str] | None = None,
               max_body_bytes: int | None = MAX_BODY_BYTES) -> httpx.Client:
        """A new client bound to the gateway, authenticated, bodies capped (caller closes it)."""
        return self.gateway.client(timeout=timeout, headers=headers, max_body_bytes=max_body_bytes)

    def health(self, timeout_s: float = HEALTH_PROBE_TIMEOUT_S) -> int:
        """The status code of the gateway's ``GET /health``."""
        return self.gateway.health(timeout_s)

    def metrics(self, timeout_s: float | None = None) -> dict[str, list[promtext.Sample]]:
        """``/metrics`` on the gateway's address, parsed (each worker's: ``worker(i).metrics()``)."""
        return self.gateway.metrics(timeout_s)

    def log_tail(self, n: int = 30) -> list[str]:
        """The last ``n`` lines of the launched gateway's log, secrets masked (empty when attached)."""
        return self.gateway.log_tail(n)

    def exit_status(self) -> ExitStatus | None:
        """How the launched gateway ended (None while running or when attached)."""
        return self.gateway.exit_status()
