"""Root conftest of pytest-sglang's own test suite.

The plugin itself is loaded through its ``pytest11`` entry point (never list it in ``pytest_plugins``:
loading it twice fails registration). Tiers that need infrastructure skip unless an option provides
it: ``--run-real-sglang`` (scripts/real-sglang/setup.sh done) and ``--run-docker`` (an engine runs).
"""

from __future__ import annotations

import signal

import pytest

# Many tests Ctrl-C a child pytest, load or server. A shell that starts this suite in the background
# (`cmd &`, nohup, some CI runners) ignores SIGINT, and an ignored signal stays ignored in every child:
# Python then installs no KeyboardInterrupt handler there and those tests hang. A handler, unlike an
# ignore, is reset to the default by exec, so every child gets Python's usual Ctrl-C again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pytest-sglang self-tests")
    group.addoption("--run-real-sglang", action="store_true", default=False,
                    help="run tests/real against real SGLang (needs scripts/real-sglang/setup.sh)")
    group.addoption("--run-docker", action="store_true", default=False,
                    help="run tests/docker against a running Docker engine")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gates = {"real_sglang": "--run-real-sglang", "docker_engine": "--run-docker"}
    for item in items:
        for marker, option in gates.items():
            if item.get_closest_marker(marker) and not config.getoption(option.lstrip("-").replace("-", "_")):
                item.add_marker(pytest.mark.skip(reason=f"needs {option}"))
