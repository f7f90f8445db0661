"""Fixtures of the acceptance suite (on top of the plugin's ``sglang_server`` and ``sglang_server_info``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang.acceptance.support import settings_from
from pytest_sglang.correctness import CheckContext, fetch_features

if TYPE_CHECKING:
    from pytest_sglang.server import SGLangServer


@pytest.fixture(scope="session")
def sglang_acceptance(
    request: pytest.FixtureRequest, sglang_server: SGLangServer, sglang_server_info: dict[str, Any]
) -> Iterator[CheckContext]:
    """The context every acceptance check runs in: a client, the server's features, the settings."""
    settings = settings_from(request.config)
    with sglang_server.client() as client:
        yield CheckContext(client, fetch_features(client, sglang_server_info), settings)
