"""Inner test file: holds the server while the outer test interrupts pytest."""

from __future__ import annotations

import time
from pathlib import Path


def test_hold(sglang_server):
    Path("server-ready.txt").write_text(sglang_server.url)
    time.sleep(120)
