"""Fixtures, built from factories (STYLE habit 12).

The servers behind the fixtures live in :class:`pytest_sglang.plugin.pool.ServerPool`. This module is
imported with the plugin in every pytest run, so what the fixtures need is imported when a test
asks for one: a run that never uses SGLang never imports the pool, the engine or httpx.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang.plugin.keys import POOL_KEY

if TYPE_CHECKING:
    import httpx

    from pytest_sglang.fleet import SGLangFleet
    from pytest_sglang.plugin.ab import ABRunner
    from pytest_sglang.plugin.load_runner import LoadRunner
    from pytest_sglang.plugin.pool import ServerPool
    from pytest_sglang.plugin.results import GateResults
    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.server.members import Handle

#: ``sglang_server_factory``: ``factory(launch_args, **LaunchConfig overrides) -> SGLangServer``.
ServerFactory = Callable[..., "SGLangServer"]


# ---- fixture factories (STYLE habit 12) ----------------------------------------------------------
def _pool(request: pytest.FixtureRequest) -> ServerPool:
    pool = request.config.stash.get(POOL_KEY, None)
    if pool is None:
        pytest.fail("pytest-sglang is not active in this run (--collect-only?)", pytrace=False)
    pool.use_tmp_factory(request.getfixturevalue("tmp_path_factory"))
    return pool


def server_fixture() -> Callable[..., Handle]:
    """A session fixture returning the run's primary server (attach or launch; one shape)."""

    def sglang_server(request: pytest.FixtureRequest) -> Handle:
        """The SGLang server under test (attached with --sglang-url, else launched)."""
        return _pool(request).primary()

    return pytest.fixture(scope="session")(sglang_server)


def client_fixture(server_fixture_name: str = "sglang_server") -> Callable[..., Iterator[httpx.Client]]:
    """A function fixture: an httpx client bound to the named server fixture, with auth."""

    def sglang_client(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
        """An httpx.Client with the server's base URL and API key; closed after the test."""
        server: Handle = request.getfixturevalue(server_fixture_name)
        with server.client() as client:
            yield client

    return pytest.fixture(sglang_client)


def factory_fixture() -> Callable[..., ServerFactory]:
    """Build the ``sglang_server_factory`` fixture."""
    def sglang_server_factory(request: pytest.FixtureRequest) -> ServerFactory:
        """``factory(launch_args, **LaunchConfig overrides) -> SGLangServer``; stopped at session end.

        A launch that fails raises the engine's own error (``PreflightError``, ``ServerExited``, ...)
        into the calling test, so ``pytest.raises(PreflightError)`` works; it is not retried.
        """
        pool = _pool(request)

        def factory(launch_args: str | Sequence[str], **overrides: object) -> SGLangServer:
            __tracebackhide__ = True
            from pytest_sglang.plugin.settings import parse_args

            args = parse_args(launch_args) if isinstance(launch_args, str) else tuple(launch_args)
            return pool.factory_launch(tuple(args), overrides)

        return factory

    return pytest.fixture(scope="session")(sglang_server_factory)


sglang_server = server_fixture()
sglang_client = client_fixture()
sglang_server_factory = factory_fixture()


@pytest.fixture(scope="session")
def sglang_server_info(sglang_server: Handle) -> dict[str, Any]:
    """The server's validated ``/server_info`` with secrets scrubbed (a JSON object)."""
    return sglang_server.info()


@pytest.fixture(scope="session")
def sglang_fleet(sglang_server: Handle) -> SGLangFleet:
    """The fleet behind the gateway under test: the gateway plus one handle per worker.

    Attach to a gateway (smg, sglang-router) with --sglang-url, or launch one with --sglang-workers N.
    """
    from pytest_sglang.fleet.handle import fleet_of  # lazily: the plugin loads without the engine

    fleet = fleet_of(sglang_server)
    if fleet is None:
        pytest.fail(f"sglang_fleet: {sglang_server.server_url} is a single SGLang server, not a gateway. Fix: "
                    "attach to SGLang's gateway (smg or sglang-router) with --sglang-url, or launch a fleet "
                    "with --sglang-workers N", pytrace=False)
    return fleet


@pytest.fixture
def sglang_load(request: pytest.FixtureRequest, sglang_server: Handle) -> LoadRunner:
    """``sglang_load(concurrency=..., input_len=..., output_len=..., requests=...) -> LoadResult``."""
    from pytest_sglang.plugin.load_runner import load_runner

    _pool(request)  # a clear failure when the plugin is inactive
    return load_runner(request, sglang_server)


@pytest.fixture
def sglang_ab(request: pytest.FixtureRequest) -> ABRunner:
    """``sglang_ab(requests=..., concurrency=..., launch_b=..., launches=N) -> GateOutcome``: interleaved A/B.

    Launches the run's configuration (A) and ``--sglang-ab-launch`` (B) in turn, one load per launch,
    and judges B on the paired differences (docs/reports.md, "Interleaved A/B").
    """
    from pytest_sglang.plugin.ab import ab_runner

    return ab_runner(request)


@pytest.fixture
def sglang_gate(request: pytest.FixtureRequest) -> GateResults:
    """The outcomes and load results the markers of this test measured (in its setup).

    ``sglang_gate.record(outcome)`` adds a gate outcome built in the test body: it is reported
    like a marker's outcome and an unmet check fails the test after the body.
    """
    from pytest_sglang.plugin.results import results_of

    return results_of(request.node)
