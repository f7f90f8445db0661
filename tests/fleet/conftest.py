"""Fixtures of tests/fleet: both of SGLang's gateways, real processes, in front of simulator workers.

smg comes with the project's ``gateway`` extra (in this venv). sglang-router 0.3.2 lives in a venv
of its own (its wheel also installs an ``smg`` script): ``scripts/gateway/setup.sh`` installs it
and scripts/test.sh exports its interpreter as ``SGLANG_ROUTER_PYTHON``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fleet_helpers import Gateway, smg_command, start_gateway

from pytest_sglang.plugin import settings

ROUTER_ENV = "SGLANG_ROUTER_PYTHON"


@pytest.fixture(autouse=True)
def _clean_sglang_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outer environment must not leak PYTEST_SGLANG_* settings into inner runs."""
    for option in settings.OPTIONS:
        monkeypatch.delenv(option.env, raising=False)
    monkeypatch.delenv("SGLANG_API_KEY", raising=False)


@pytest.fixture(scope="session")
def router_gateway_command() -> Iterator[str]:
    """The ``--sglang-gateway-command`` value that runs sglang-router 0.3.2 (from SGLANG_ROUTER_PYTHON)."""
    python = os.environ.get(ROUTER_ENV)
    if not python:
        pytest.skip(f"{ROUTER_ENV} is not set: run `bash scripts/gateway/setup.sh` and export the "
                    f"{ROUTER_ENV}=... line it prints (scripts/test.sh does both)")
    if not Path(python).is_file():
        pytest.fail(f"{ROUTER_ENV}={python} does not exist: run `bash scripts/gateway/setup.sh`", pytrace=False)
    yield f"{python} -m sglang_router.launch_router"


@pytest.fixture(params=["smg", "sglang-router"])
def gateway_command(request: pytest.FixtureRequest) -> str:
    """Each gateway in turn, as ``--sglang-gateway-command`` text."""
    if request.param == "smg":
        return smg_command()
    command: str = request.getfixturevalue("router_gateway_command")
    return command


@pytest.fixture
def gateway_factory(tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    """Start gateways (``gateway_factory(command, worker_urls, *extra_args)``); all killed at teardown."""
    started: list[Gateway] = []

    def factory(command: str, worker_urls: list[str], *extra: str) -> Gateway:
        gateway = start_gateway(command, worker_urls, tmp_path, *extra)
        started.append(gateway)
        return gateway

    yield factory
    for gateway in started:
        gateway.stop()
