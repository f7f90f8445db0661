"""The server engine: launch or attach, wait for readiness, validate, stop.

Usable without pytest::

    from pytest_sglang.server import LaunchConfig, start_server

    config = LaunchConfig(runner="simulator", args=("--model-path", "sim/tiny-llama"), startup_timeout_s=60)
    with start_server(config) as server:
        print(server.url, server.info()["max_total_num_tokens"])

Names are loaded on first use (PEP 562): the plugin imports light modules of this package (such as
:mod:`.url` to parse ``--sglang-url`` at configure time) without paying for httpx and tenacity.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ATTACH_TIMEOUT_S": "pytest_sglang.server.start",
    "attach": "pytest_sglang.server.start",
    "launch": "pytest_sglang.server.start",
    "start_server": "pytest_sglang.server.start",
    "DockerOptions": "pytest_sglang.server.config",
    "LaunchConfig": "pytest_sglang.server.config",
    "ExitStatus": "pytest_sglang.server.base",
    "SGLangServer": "pytest_sglang.server.handle",
    "StartupReport": "pytest_sglang.server.phases",
    "ServerURL": "pytest_sglang.server.url",
    "parse_server_url": "pytest_sglang.server.url",
}

__all__ = [
    "ATTACH_TIMEOUT_S",
    "DockerOptions",
    "ExitStatus",
    "LaunchConfig",
    "SGLangServer",
    "ServerURL",
    "StartupReport",
    "attach",
    "launch",
    "parse_server_url",
    "start_server",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    from pytest_sglang.server.base import ExitStatus
    from pytest_sglang.server.config import DockerOptions, LaunchConfig
    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.server.phases import StartupReport
    from pytest_sglang.server.start import ATTACH_TIMEOUT_S, attach, launch, start_server
    from pytest_sglang.server.url import ServerURL, parse_server_url
