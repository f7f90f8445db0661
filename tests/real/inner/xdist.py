"""Inner tests run by pytester with ``-n 2``: workers share the one server the controller launched."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n", range(4))
def test_worker_sees_the_one_server(sglang_server, sglang_server_info, n):
    assert sglang_server.health() == 200
    assert sglang_server_info["max_total_num_tokens"] == 4096
