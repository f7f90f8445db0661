"""pytest-sglang: an SGLang server configuration as a pass/fail acceptance gate.

The public API is listed in ``__all__`` and loaded lazily (PEP 562), so that pytest loading the
plugin does not import httpx, aiohttp or docker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_sglang import lazy
from pytest_sglang.version import SGLANG_VERSION, __version__

_EXPORTS: dict[str, str] = {
    # server lifecycle
    "start_server": "pytest_sglang.fleet.connect",
    "SGLangServer": "pytest_sglang.server",
    "LaunchConfig": "pytest_sglang.server",
    # validation
    "validate_payload": "pytest_sglang.server.validation",
    "load_schema": "pytest_sglang.server.validation",
    # load generation
    "run_load": "pytest_sglang.loadgen",
    "LoadSpec": "pytest_sglang.loadgen",
    "LoadResult": "pytest_sglang.loadgen",
    "RequestRecord": "pytest_sglang.loadgen",
    # gates
    "assert_capacity": "pytest_sglang.gates.facts.capacity",
    "assert_hicache": "pytest_sglang.gates.facts.hicache",
    "assert_throughput": "pytest_sglang.gates.load.throughput",
    "Check": "pytest_sglang.gates.base",
    "GateOutcome": "pytest_sglang.gates.base",
    "compare": "pytest_sglang.gates.base",
    # planning
    "plan_hicache": "pytest_sglang.sglang.hostmem",
    # simulator
    "Simulator": "pytest_sglang.simulator",
    # what the fixtures return (sglang_load, sglang_gate): for annotating tests
    "LoadRunner": "pytest_sglang.plugin.load_runner",
    "GateResults": "pytest_sglang.plugin.results",
    # errors
    "SGLangError": "pytest_sglang.errors",
    "ConfigError": "pytest_sglang.errors",
    "PreflightError": "pytest_sglang.errors",
    "ServerStartError": "pytest_sglang.errors",
    "ServerExited": "pytest_sglang.errors",
    "ServerNotReady": "pytest_sglang.errors",
    "ServerUnavailable": "pytest_sglang.errors",
    "SchemaMismatch": "pytest_sglang.errors",
    "DockerError": "pytest_sglang.errors",
    "LoadGenError": "pytest_sglang.errors",
}

__all__ = [
    "SGLANG_VERSION",
    "Check",
    "ConfigError",
    "DockerError",
    "GateOutcome",
    "GateResults",
    "LaunchConfig",
    "LoadGenError",
    "LoadResult",
    "LoadRunner",
    "LoadSpec",
    "PreflightError",
    "RequestRecord",
    "SGLangError",
    "SGLangServer",
    "SchemaMismatch",
    "ServerExited",
    "ServerNotReady",
    "ServerStartError",
    "ServerUnavailable",
    "Simulator",
    "__version__",
    "assert_capacity",
    "assert_hicache",
    "assert_throughput",
    "compare",
    "load_schema",
    "plan_hicache",
    "run_load",
    "start_server",
    "validate_payload",
]


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from pytest_sglang.errors import (
        ConfigError,
        DockerError,
        LoadGenError,
        PreflightError,
        SchemaMismatch,
        ServerExited,
        ServerNotReady,
        ServerStartError,
        ServerUnavailable,
        SGLangError,
    )
    from pytest_sglang.fleet.connect import start_server
    from pytest_sglang.gates.base import Check, GateOutcome, compare
    from pytest_sglang.gates.facts.capacity import assert_capacity
    from pytest_sglang.gates.facts.hicache import assert_hicache
    from pytest_sglang.gates.load.throughput import assert_throughput
    from pytest_sglang.loadgen import LoadResult, LoadSpec, RequestRecord, run_load
    from pytest_sglang.plugin.load_runner import LoadRunner
    from pytest_sglang.plugin.results import GateResults
    from pytest_sglang.server import LaunchConfig, SGLangServer
    from pytest_sglang.server.validation import load_schema, validate_payload
    from pytest_sglang.sglang.hostmem import plan_hicache
    from pytest_sglang.simulator import Simulator
