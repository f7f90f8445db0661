"""Fleets: SGLang workers behind SGLang's own gateway (smg, sglang-router), attached or launched.

:func:`launch_fleet` starts N workers with the existing runners and the gateway in front of them;
:func:`attach_gateway` detects a gateway at a URL and discovers its workers. Both give the gateway's
:class:`~pytest_sglang.server.SGLangServer` with :attr:`~pytest_sglang.server.SGLangServer.fleet` set
to an :class:`SGLangFleet` (one :class:`WorkerHandle` per worker).
"""

from __future__ import annotations

from pytest_sglang.fleet.attach import attach_gateway
from pytest_sglang.fleet.discovery import Discovery, GatewayFlavor, Readiness, WorkerEntry
from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
from pytest_sglang.fleet.launch import FleetSpec, launch_fleet
from pytest_sglang.fleet.progress import FleetProgress

__all__ = ["Discovery", "FleetProgress", "FleetSpec", "GatewayFlavor", "Readiness", "SGLangFleet", "WorkerEntry",
           "WorkerHandle", "attach_gateway", "launch_fleet"]
