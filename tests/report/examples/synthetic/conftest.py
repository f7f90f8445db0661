"""Inner conftest for the report pytester tests: a fake server handle and the baseline call.

The fake handle has the shape of ``SGLangServer`` (``info()``, ``mode``, ``config``, ``startup``,
the last two real engine objects); ``SYNTH_GPU`` changes its GPU model so that the setups differ,
``SYNTH_ARGS`` adds launch args (a candidate configuration), ``SYNTH_MODEL`` changes the model
(``SYNTH_TOKENS``, read by the inner tests, its KV pool). The hook wrapper does what the plugin does
in a test's call phase: ask the report session for the baseline outcome and fail.
"""

from __future__ import annotations

import json
import os
import shlex

import pytest

from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.plugin.report_session import baseline_outcome, get_session
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.phases import PhaseSpan, StartupReport


class FakeServer:
    mode = "simulator"
    url = "http://127.0.0.1:1"
    initial_info = None  # no readiness wait read it: identify() asks info()

    def __init__(self) -> None:
        args = ("--model-path", "tiny", "--tp", "1", "--api-key", "sk-secret-123456")
        self.config = LaunchConfig(runner="simulator", args=(*args, *shlex.split(os.environ.get("SYNTH_ARGS", ""))),
                                   startup_timeout_s=60.0)
        self.startup = StartupReport(phases=[PhaseSpan("load weights", 0.1, 1.5), PhaseSpan("warmup", 1.5, 2.5)],
                                     ready_s=2.5)

    def info(self) -> dict[str, object]:
        return {
            "version": "0.5.23",
            "model_path": os.environ.get("SYNTH_MODEL", "tiny"),
            "tp_size": 1,
            "dp_size": 1,
            "device": "cuda",
            "gpu_model": os.environ.get("SYNTH_GPU", "H100"),
            "api_key": "sk-secret-123456",
            "launch_command": "--model-path tiny --tp 1 --api-key sk-secret-123456",
        }


@pytest.hookimpl(trylast=True)  # after the plugin registered its ReportSession
def pytest_configure(config: pytest.Config) -> None:
    session = get_session(config)
    if session is not None and not hasattr(config, "workerinput"):
        session.server_started(FakeServer())
    elif session is not None:
        session.server_started(FakeServer(), runner="simulator")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):  # type: ignore[no-untyped-def]
    result = yield
    loads = [json.loads(str(v)) for k, v in item.user_properties if k == "sglang_load"]
    gates = [GateOutcome.from_dict(json.loads(str(v))) for k, v in item.user_properties if k == "sglang_outcome"]
    outcome = baseline_outcome(item.config, item.nodeid, loads, gates)
    if outcome is not None:
        item.user_properties.append(("sglang_outcome", json.dumps(outcome.to_dict())))
        outcome.raise_for_failures()
    return result
