"""Inner test file: the server factory raises the engine's own errors into the test body."""

from __future__ import annotations

import os

import pytest

from pytest_sglang import PreflightError, ServerExited

TINY = ["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05"]
# 1000 GB of host pool on the tiny profile's 32 GB simulated host: refused before anything starts.
TOO_BIG = [*TINY, "--enable-hierarchical-cache", "--hicache-size", "1000",
           "--sim-launch-counter", os.environ["LAUNCH_COUNTER"]]
CRASH = [*TINY, "--api-key", os.environ["SECRET_KEY"], "--sim-fault", "crash-at:weights"]


def test_preflight_refusal_is_catchable(sglang_server_factory):
    with pytest.raises(PreflightError) as refused:
        sglang_server_factory(TOO_BIG)
    assert "Fix:" in str(refused.value)
    with pytest.raises(PreflightError) as again:  # remembered: not retried
        sglang_server_factory(list(TOO_BIG))
    assert again.value is refused.value


def test_crash_is_catchable(sglang_server_factory):
    with pytest.raises(ServerExited) as crashed:
        sglang_server_factory(CRASH)
    print("CAUGHT:", crashed.value)


def test_crash_uncaught_is_a_failure(sglang_server_factory):
    sglang_server_factory(CRASH)


def test_a_bad_override_fails_with_its_message_once(sglang_server_factory):
    sglang_server_factory(TINY, startup_timout_s=5)


def test_a_bad_override_value_fails_with_its_message_once(sglang_server_factory):
    sglang_server_factory(TINY, runner="k8s")
