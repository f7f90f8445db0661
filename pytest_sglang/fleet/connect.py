"""One entry for a URL or a launch config: one server, or a fleet behind its gateway (detected here).

Gateway detection sits above both handles: :mod:`pytest_sglang.server` knows nothing of fleets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_sglang import defaults
from pytest_sglang.fleet.attach import attach_gateway
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.members import Handle
from pytest_sglang.server.progress import ProgressSink
from pytest_sglang.server.start import ATTACH_TIMEOUT_S, attach, launch
from pytest_sglang.server.url import ServerURL, parse_server_url

__all__ = ["connect", "start_server"]


def connect(url: str | ServerURL, api_key: str | None = None, validate: str = "strict",
            timeout_s: float = ATTACH_TIMEOUT_S, *, min_workers: int | None = None,
            fleet_direct: str = defaults.DEFAULT_FLEET_DIRECT) -> Handle:
    """Attach to ``url``: the fleet when it is a gateway (smg, sglang-router), else the one server.

    One deadline, ``min(timeout_s, ATTACH_TIMEOUT_S)``, covers the detection and the readiness wait.
    ``min_workers`` healthy workers are needed (default: all); ``fleet_direct`` says how the workers are
    probed directly. Never stops what it attached to.
    """
    address = url if isinstance(url, ServerURL) else parse_server_url(url)
    started, budget = time.monotonic(), min(timeout_s, ATTACH_TIMEOUT_S)
    fleet = attach_gateway(address, api_key=api_key, validate=validate, timeout_s=budget,
                           min_workers=min_workers, direct=fleet_direct)
    if fleet is not None:
        return fleet
    return attach(address, api_key, validate, budget, started=started)


@contextmanager
def start_server(config: LaunchConfig | None = None, *, url: str | ServerURL | None = None,
                 api_key: str | None = None, progress: ProgressSink | None = None) -> Iterator[Handle]:
    """Attach to ``url`` (a server or a gateway) or launch ``config``; stop a launched server on exit.

    An attached server or fleet is never stopped.
    """
    if url is not None:
        validate = config.validate if config is not None else "strict"
        timeout = config.startup_timeout_s if config is not None else ATTACH_TIMEOUT_S
        yield connect(url, api_key or (config.api_key if config else None), validate, timeout)
        return
    if config is None:
        raise TypeError("start_server() needs a LaunchConfig or url=")
    server = launch(config, progress)
    try:
        yield server
    finally:
        server.stop()
