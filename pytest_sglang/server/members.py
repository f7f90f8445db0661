"""The handle's shape as the gates see it: what they judge is ``members()``, one server or a fleet's workers.

A lone :class:`~pytest_sglang.server.SGLangServer` is its own one member; a fleet
(:class:`~pytest_sglang.fleet.SGLangFleet`) returns its workers. A gate that checks each server's own
figures (capacity, hicache...) loops over ``members()`` and never asks which kind of handle it holds; only
what exists on a fleet alone (failover, prefill-decode, worker shares) asks for the fleet.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx

    from pytest_sglang.server.base import ExitStatus, RunningProcess
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.server.phases import StartupReport
    from pytest_sglang.server.url import ServerURL
    from pytest_sglang.sglang.args import LaunchArgs
    from pytest_sglang.sglang.metrics_text import Sample

__all__ = ["Handle", "Member"]


class Member(Protocol):
    """One server a gate judges: the handle's lone server, or one worker of a fleet."""

    @property
    def server(self) -> SGLangServer | None:
        """Its own handle, talked to directly (None when this machine cannot reach it)."""

    @property
    def unreachable(self) -> str | None:
        """Why ``server`` is None, in words for messages."""

    @property
    def role(self) -> str:
        """``regular``, ``prefill`` or ``decode`` (a lone server is ``regular``)."""

    def label(self) -> str | None:
        """``worker 1 (URL)`` for a fleet's worker; None for a lone server (its records keep plain names)."""

    def metrics_or_why(self, timeout_s: float | None = None) -> dict[str, list[Sample]] | str:
        """Its own ``/metrics``, parsed, or in words why they cannot be read (a gate notes it and goes on).

        ``timeout_s`` bounds the read (a caller with a deadline passes what is left of it).
        """

    def fact(self, name: str) -> str | None:
        """What the gateway lists about it (smg 1.x labels: ``tp_size``, ``version``...); None for a lone server."""


class Handle(Protocol):
    """What fixtures and gates take: a server, or a fleet served by its gateway; each tells its members.

    The rest is the shape both share (the fleet answers through its gateway): what the gates and the
    load generator use without asking which one they hold.
    """

    @property
    def url(self) -> str:
        """The clean base URL (never credentials)."""

    @property
    def server_url(self) -> ServerURL:
        """The parsed address (``str()`` masks a password)."""

    @property
    def api_key(self) -> str | None:
        """The key requests carry (never printed)."""

    @property
    def mode(self) -> str:
        """``attach`` or the runner that launched it."""

    @property
    def validate(self) -> str:
        """How ``/server_info`` is validated."""

    @property
    def config(self) -> LaunchConfig | None:
        """The launch config (None when attached)."""

    @property
    def launch_args(self) -> LaunchArgs | None:
        """The launch args (None when attached)."""

    @property
    def process(self) -> RunningProcess | None:
        """The launched process (a fleet: its gateway's; None when attached)."""

    @property
    def startup(self) -> StartupReport | None:
        """How the start went, when launched."""

    @property
    def log_path(self) -> Path | None:
        """The launched process's log file."""

    @property
    def initial_info(self) -> dict[str, Any] | None:
        """The ``/server_info`` read at start (None for a fleet: each worker has its own)."""

    def describe(self) -> str:
        """One line for messages (no credentials)."""

    def client(self, *, timeout: httpx.Timeout | float | None = ..., headers: dict[str, str] | None = ...,
               max_body_bytes: int | None = ...) -> httpx.Client:
        """A new authenticated client bound to the handle's URL (caller closes it)."""

    def info(self) -> dict[str, Any]:
        """``/server_info`` (a fleet: its first reachable worker's)."""

    def health(self, timeout_s: float = ...) -> int:
        """The status code of ``GET /health``."""

    def metrics(self) -> dict[str, list[Sample]]:
        """``/metrics``, parsed."""

    def log_tail(self, n: int = ...) -> list[str]:
        """The last lines of the launched process's log, secrets masked."""

    def exit_status(self) -> ExitStatus | None:
        """How the launched process ended (None while running or when attached)."""

    def stop(self, grace_s: float = ...) -> ExitStatus | None:
        """Stop what was launched (idempotent); attached ones are left alone."""

    def members(self) -> Sequence[Member]:
        """The servers behind this handle: itself when alone, its workers for a fleet."""
