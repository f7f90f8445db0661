"""The server engine: launch or attach, wait for readiness, validate, stop.

Usable without pytest::

    from pytest_sglang.server import LaunchConfig, launch

    config = LaunchConfig(runner="simulator", args=("--model-path", "sim/tiny-llama"), startup_timeout_s=60)
    with launch(config) as server:
        print(server.url, server.info()["max_total_num_tokens"])

``pytest_sglang.start_server`` (:mod:`pytest_sglang.fleet.connect`) also detects a gateway at a URL.

Names are loaded on first use (PEP 562): the plugin imports light modules of this package (such as
:mod:`.url` to parse ``--sglang-url`` at configure time) without paying for httpx and tenacity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_sglang import lazy

_EXPORTS: dict[str, str] = {
    "ATTACH_TIMEOUT_S": "pytest_sglang.server.start",
    "attach": "pytest_sglang.server.start",
    "launch": "pytest_sglang.server.start",
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
]


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from pytest_sglang.server.base import ExitStatus
    from pytest_sglang.server.config import DockerOptions, LaunchConfig
    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.server.phases import StartupReport
    from pytest_sglang.server.start import ATTACH_TIMEOUT_S, attach, launch
    from pytest_sglang.server.url import ServerURL, parse_server_url
