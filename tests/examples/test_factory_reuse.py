"""Inner test file: the server factory reuses identical configurations and launches different ones."""

from __future__ import annotations

import os

ARGS = ["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05",
        "--sim-launch-counter", os.environ["LAUNCH_COUNTER"]]


def test_reuse(sglang_server_factory):
    first = sglang_server_factory(ARGS)
    again = sglang_server_factory(list(ARGS))
    assert first is again
    other = sglang_server_factory([*ARGS, "--max-running-requests", "7"])
    assert other is not first and other.url != first.url
    assert other.health() == 200
