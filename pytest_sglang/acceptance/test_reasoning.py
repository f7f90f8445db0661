"""Reasoning through the server's ``--reasoning-parser``: ``reasoning_content`` apart from ``content``."""

from __future__ import annotations

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext, reasoning


@pytest.mark.parametrize("stream", [False, True], ids=["batch", "stream"])
def test_reasoning(sglang_acceptance: CheckContext, stream: bool) -> None:
    run(reasoning.check_reasoning, sglang_acceptance, stream)
