"""Fleets: SGLang workers behind SGLang's own gateway (smg, sglang-router), attached or launched.

:func:`launch_fleet` starts N workers with the existing runners and the gateway in front of them;
:func:`attach_gateway` detects a gateway at a URL and discovers its workers. Both give the gateway's
:class:`~pytest_sglang.server.SGLangServer` with :attr:`~pytest_sglang.server.SGLangServer.fleet` set
to an :class:`SGLangFleet` (one :class:`WorkerHandle` per worker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_sglang import lazy

# Loaded on first use: the report reads pytest_sglang.fleet.handle right after a single server's first
# /health 200, and the launch and attach machinery (~150 ms on a busy machine) must not come with it.
__getattr__, __dir__ = lazy.exports(__name__, {
    "attach_gateway": "pytest_sglang.fleet.attach",
    "Discovery": "pytest_sglang.fleet.discovery", "GatewayFlavor": "pytest_sglang.fleet.discovery",
    "Readiness": "pytest_sglang.fleet.discovery", "WorkerEntry": "pytest_sglang.fleet.discovery",
    "SGLangFleet": "pytest_sglang.fleet.handle", "WorkerHandle": "pytest_sglang.fleet.handle",
    "FleetSpec": "pytest_sglang.fleet.launch", "launch_fleet": "pytest_sglang.fleet.launch",
    "FleetProgress": "pytest_sglang.fleet.progress",
})

__all__ = ["Discovery", "FleetProgress", "FleetSpec", "GatewayFlavor", "Readiness", "SGLangFleet", "WorkerEntry",
           "WorkerHandle", "attach_gateway", "launch_fleet"]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from pytest_sglang.fleet.attach import attach_gateway
    from pytest_sglang.fleet.discovery import Discovery, GatewayFlavor, Readiness, WorkerEntry
    from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
    from pytest_sglang.fleet.launch import FleetSpec, launch_fleet
    from pytest_sglang.fleet.progress import FleetProgress
