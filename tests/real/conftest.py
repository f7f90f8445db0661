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

HERE = Path(__file__).parent
INNER = HERE / "inner"
RAW_SERVER = pytest.StashKey[RawServer]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run this tier's raw-server tests first and together, so that server lives only that long.

    The whole suite runs in one session: without this, the session-scoped raw server (about 2 GB)
    would stay up through the launch tests and every later tier.
    """
    slots = [i for i, item in enumerate(items) if HERE in item.path.parents]
    mine = sorted((items[i] for i in slots), key=lambda item: "raw_server" not in _fixtures(item))
    for slot, item in zip(slots, mine, strict=True):
        items[slot] = item


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # Stop the raw server after the last test that uses it (its fixture finalizer then only checks).
    if "raw_server" in _fixtures(item) and (nextitem is None or "raw_server" not in _fixtures(nextitem)):
        server = item.config.stash.get(RAW_SERVER, None)
        if server is not None:
            server.stop()


def _fixtures(item: pytest.Item) -> list[str]:
    return list(getattr(item, "fixturenames", ()))


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
    real_setup: RealSetup, real_api_key: str, tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[RawServer]:
    """A real SGLang 0.5.23 server started without the plugin, with an API key, probes recorded."""
    since = time.time()
    log = tmp_path_factory.mktemp("raw-sglang") / "server.log"
    server = RawServer(real_setup, log, api_key=real_api_key)
    pytestconfig.stash[RAW_SERVER] = server
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
