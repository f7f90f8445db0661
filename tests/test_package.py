"""The package surface: public API, cheap import, entry point, `-p no:sglang`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pytest_sglang

EXPECTED_PUBLIC = {
    "Check", "ConfigError", "DockerError", "GateOutcome", "LaunchConfig", "LoadGenError", "LoadResult",
    "LoadSpec", "PreflightError", "RequestRecord", "SGLANG_VERSION", "SGLangError", "SGLangServer", "SchemaMismatch",
    "ServerExited", "ServerNotReady", "ServerStartError", "ServerUnavailable", "Simulator", "__version__",
    "assert_capacity", "assert_hicache", "assert_throughput", "compare", "load_schema", "plan_hicache", "run_load",
    "start_server", "validate_payload",
}


def test_public_api_is_curated() -> None:
    assert set(pytest_sglang.__all__) == EXPECTED_PUBLIC


@pytest.mark.parametrize("name", sorted(EXPECTED_PUBLIC - {"__version__", "SGLANG_VERSION"}))
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(pytest_sglang, name) is not None


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pytest_sglang.nope  # noqa: B018


def test_importing_the_plugin_stays_cheap() -> None:
    # pytest loads the plugin in every run of every project that installs us: keep heavy imports lazy.
    code = (
        "import sys, json, pytest_sglang.plugin.hooks; "
        "print(json.dumps(sorted(m for m in ('httpx','aiohttp','docker','jsonschema','tenacity','psutil',"
        "'prometheus_client') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_plugin_is_registered_and_can_be_disabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:sglang", "--trace-config")
    result.assert_outcomes(passed=1)
    assert "pytest_sglang/plugin.py" not in result.stdout.str()
    result = pytester.runpytest_subprocess("--trace-config")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*sglang*:*pytest_sglang/plugin.py"])


def test_cli_dispatcher_usage() -> None:
    run = subprocess.run([sys.executable, "-m", "pytest_sglang"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "usage: python -m pytest_sglang {load,plan,compare}" in run.stdout
    run = subprocess.run([sys.executable, "-m", "pytest_sglang", "frobnicate"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "unknown command 'frobnicate'" in run.stderr
