"""Fixtures of the acceptance suite (on top of the plugin's ``sglang_server`` and ``sglang_server_info``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang.acceptance.support import (
    settings_from,
    sglang_acceptance_records,  # noqa: F401  (records each check)
)
from pytest_sglang.correctness import CheckContext, fetch_features
from pytest_sglang.correctness.deadline import Budget
from pytest_sglang.fleet.handle import fleet_of

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle


@pytest.fixture(scope="session")
def sglang_acceptance(
    request: pytest.FixtureRequest, sglang_server: Handle, sglang_server_info: dict[str, Any]
) -> Iterator[CheckContext]:
    """The context every acceptance check runs in: a client, the server's features, the settings.

    Behind a gateway the requests go through the gateway; the features come from a worker (the
    gateway has no /server_info of its own) and the slot check reads every worker's /metrics.
    """
    settings = settings_from(request.config)
    suite = Budget.for_suite(settings.suite_timeout_s)  # counted from the suite's first check
    fleet = fleet_of(sglang_server)
    with ExitStack() as stack:
        client = stack.enter_context(sglang_server.client())
        if fleet is None:
            yield CheckContext(client, fetch_features(client, sglang_server_info), settings, budget=suite)
            return
        workers = [w.server for w in fleet.reachable_workers() if w.server is not None]
        direct = tuple(stack.enter_context(w.client()) for w in workers)
        features = fetch_features(direct[0], sglang_server_info) if direct else fetch_features(client,
                                                                                                sglang_server_info)
        yield CheckContext(client, dataclasses.replace(features, gateway=fleet.flavor), settings,
                           metrics_clients=direct, budget=suite)
