"""``--sglang-launch`` is read once on its way to ``Popen`` (issue 31).

The option row (typos refused at configure time), the header, the markers' needs, the engine's
LaunchConfig and the JSON report's fingerprint all take one parse (``server/config.read_launch``). A
conftest counts every call of SGLang's argument reader in the pytest process of a real run that
launches the simulator; the simulator reads its own argv in its own process (not counted).
"""

from __future__ import annotations

import json

import pytest

from tests.plugin.plugin_helpers import SIM_LAUNCH

COUNTING_CONFTEST = """
import importlib
import json
from pathlib import Path

import pytest_sglang.sglang.args as sglang_args

CALLS = []
_real = sglang_args.parse_launch_args


def _counted(argv, **kwargs):
    CALLS.append(list(argv))
    return _real(argv, **kwargs)


# Every module that reads launch args by this name (a module-level import keeps its own reference).
for name in ("pytest_sglang.sglang.args", "pytest_sglang.server.config", "pytest_sglang.report.fingerprint"):
    module = importlib.import_module(name)
    if hasattr(module, "parse_launch_args"):
        module.parse_launch_args = _counted


def pytest_unconfigure(config):
    Path("parses.json").write_text(json.dumps(CALLS))
"""

TESTS = """
import pytest


@pytest.mark.sglang_hicache(enabled=False)
def test_server(sglang_server):
    assert sglang_server.launch_args.model_path == "sim/tiny-llama"
"""


def test_a_launch_is_parsed_once_from_its_option_to_popen(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(COUNTING_CONFTEST)
    pytester.makepyfile(test_inner=TESTS)
    # --enable-metrics: a flag the header, the markers' needs and the fingerprint each look at.
    launch = f"{SIM_LAUNCH} --enable-metrics"
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={launch}", "--sglang-report",
                                           "report.json", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)
    parses = json.loads((pytester.path / "parses.json").read_text())
    launches = [argv for argv in parses if "sim/tiny-llama" in argv]
    assert launches == [launch.split()], f"the launch was read {len(launches)} times: {parses}"
