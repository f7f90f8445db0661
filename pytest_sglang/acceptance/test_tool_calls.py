"""Tool calls through the server's ``--tool-call-parser``: ``tool_calls``, never text."""

from __future__ import annotations

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext, tools


@pytest.mark.parametrize("stream", [False, True], ids=["batch", "stream"])
def test_tool_calls(sglang_acceptance: CheckContext, stream: bool) -> None:
    """Offered tools come back as ``tool_calls`` naming them, with arguments matching their schema."""
    run(tools.check_tool_calls, sglang_acceptance, stream)
