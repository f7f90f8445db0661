"""Inner test file: what the plugin did between the server's readiness and the first test body."""

from __future__ import annotations

import re
import sys


def test_first_body(sglang_server):
    # The load generator (aiohttp, rich...) is imported when a load runs, not to start or attach a server.
    assert "pytest_sglang.loadgen" not in sys.modules
    # Nor the fleet launch machinery for one server (fleet.handle tells a fleet from a server).
    assert "pytest_sglang.fleet.launch" not in sys.modules
    with sglang_server.client() as client:
        text = client.get("/metrics").text
    gets = re.findall(r'http_requests_total\{[^}]*endpoint="/server_info"[^}]*method="GET"[^}]*\} (\S+)', text)
    print(f"SERVER_INFO_GETS={int(float(gets[0])) if gets else 0}")
