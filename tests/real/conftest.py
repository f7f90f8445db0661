"""Fixtures of the real-SGLang tier (tests/real, run with ``--run-real-sglang``).

One raw real server serves every attach-style test of the run (a real start costs ~30 s of both
cores); launch and crash tests start their own through the plugin, one at a time.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from realsgl import RawServer, RealSetup, wait_no_sglang

INNER = Path(__file__).parent / "inner"


@pytest.fixture(scope="session")
def real_setup() -> RealSetup:
    try:
        return RealSetup.locate()
    except FileNotFoundError as exc:
        # --run-real-sglang asked for this tier: a missing setup is a failure, never a skip.
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def real_api_key() -> str:
    return f"sk-real-{secrets.token_hex(12)}"


@pytest.fixture(scope="session")
def raw_server(
    real_setup: RealSetup, real_api_key: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RawServer]:
    """A real SGLang 0.5.23 server started without the plugin, with an API key, probes recorded."""
    since = time.time()
    log = tmp_path_factory.mktemp("raw-sglang") / "server.log"
    server = RawServer(real_setup, log, api_key=real_api_key)
    server.start()
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()
        left = wait_no_sglang(real_setup, since)
        assert not left, f"raw real server left processes behind: {left}"


@pytest.fixture
def inner_file(pytester: pytest.Pytester) -> Callable[[str], Path]:
    """Copy ``tests/real/inner/<name>.py`` into the pytester dir as ``test_<name>.py``."""

    def copy(name: str) -> Path:
        return pytester.makepyfile(**{f"test_{name}": (INNER / f"{name}.py").read_text()})

    return copy


@pytest.fixture
def leftover_check(real_setup: RealSetup) -> Iterator[None]:
    """Fail the test if real SGLang processes created during it are still alive afterwards."""
    since = time.time()
    yield
    left = wait_no_sglang(real_setup, since)
    assert not left, "real SGLang processes left behind after the run:\n" + "\n".join(left)
