"""Fixtures of the seed acceptance suite (the server under test is configured in pytest.ini)."""

from __future__ import annotations

import pytest
from seed import SEED, SIM


@pytest.fixture(scope="session")
def hicache_off_server(sglang_server_factory):
    """The same launch without the hierarchical cache: the A side of the A/B."""
    return sglang_server_factory([*SEED, "--enable-metrics", *SIM])
