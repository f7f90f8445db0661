"""Inner test run by pytester: holds the launched real server until pytest is signalled."""

from __future__ import annotations

import os
import time
from pathlib import Path


def test_holds_the_server(sglang_server):
    assert sglang_server.health() == 200
    Path(os.environ["REAL_HOLD_FLAG"]).write_text(str(sglang_server.url))
    time.sleep(300)  # the outer test sends SIGTERM to this pytest long before
