"""Attach to a gateway: detect it (``GET /workers``), wait for its readiness, probe every worker directly."""

from __future__ import annotations

import time

import httpx

from pytest_sglang import defaults
from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.discovery import discover, gateway_version
from pytest_sglang.fleet.handle import SGLangFleet
from pytest_sglang.fleet.probe import probe_workers
from pytest_sglang.fleet.readiness import GatewayTarget, wait_gateway_ready
from pytest_sglang.server.client import make_client
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.url import ServerURL

__all__ = ["attach_gateway"]

#: A gateway answers GET /workers at once; a server that does not gets at most this share of the deadline
#: for it (the rest is for the server's own readiness wait).
_DETECT_SHARE = 0.25
_DETECT_TIMEOUT_S = 5.0


def attach_gateway(address: ServerURL, *, api_key: str | None, validate: str, timeout_s: float,
                   min_workers: int | None = None, direct: str = defaults.DEFAULT_FLEET_DIRECT) -> SGLangFleet | None:
    """The fleet behind the gateway at ``address``, or None when it is not a gateway (a plain SGLang server).

    ``timeout_s`` is the one deadline for the readiness wait and the worker probes.
    """
    if direct not in defaults.FLEET_DIRECT_MODES:
        raise ConfigError("fleet_direct", direct, "unknown mode",
                          f"pass one of {', '.join(defaults.FLEET_DIRECT_MODES)}")
    started = time.monotonic()
    detect_s = max(0.25, min(_DETECT_TIMEOUT_S, timeout_s * _DETECT_SHARE))
    timeout = httpx.Timeout(detect_s, connect=min(2.0, detect_s))
    with make_client(address, api_key, timeout=timeout, trust_env=False) as client:
        found = discover(client, timeout_s=detect_s)
        version = gateway_version(client) if found is not None and found.flavor == "smg" else None
    if found is None:
        return None
    discovery = wait_gateway_ready(GatewayTarget(address, "attach", api_key=api_key, min_workers=min_workers),
                                   timeout_s, started=started)
    left = max(1.0, timeout_s - (time.monotonic() - started))
    handles = probe_workers(discovery, api_key=api_key, validate=validate, direct=direct, timeout_s=left)
    gateway = SGLangServer(address, "attach", api_key=api_key, validate=validate)
    return SGLangFleet(gateway, discovery.flavor, handles, version=version, direct=direct)
