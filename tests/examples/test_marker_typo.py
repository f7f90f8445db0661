"""Inner test file: a misspelt marker keyword is a usage error at collection."""

from __future__ import annotations

import pytest


@pytest.mark.sglang_capacity(min_total_token=1000)
def test_capacity(sglang_server):
    pass
