"""The package surface: public API, exported fixture types, cheap and portable import, `-p no:sglang`."""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_sglang
from pytest_sglang.plugin import fixtures, load_runner, results

EXPECTED_PUBLIC = {
    "Check", "ConfigError", "DockerError", "GateOutcome", "GateResults", "LaunchConfig", "LoadGenError",
    "LoadResult", "LoadRunner", "LoadSpec", "PreflightError", "RequestRecord", "SGLANG_VERSION", "SGLangError",
    "SGLangServer", "SchemaMismatch", "ServerExited", "ServerNotReady", "ServerStartError", "ServerUnavailable",
    "Simulator", "__version__", "assert_capacity", "assert_hicache", "assert_throughput", "compare", "load_schema",
    "plan_hicache", "run_load", "start_server", "validate_payload",
}

#: Never imported by a run that does not use SGLang (third-party and our own heavy packages).
HEAVY = ("httpx", "aiohttp", "docker", "jsonschema", "tenacity", "psutil", "prometheus_client", "filelock",
         "pytest_sglang.server", "pytest_sglang.loadgen", "pytest_sglang.simulator", "pytest_sglang.sglang",
         "pytest_sglang.cli", "pytest_sglang.gates.keywords", "pytest_sglang.gates.facts.capacity",
         "pytest_sglang.gates.facts.hicache", "pytest_sglang.gates.load.throughput", "pytest_sglang.gates.load.slo",
         "pytest_sglang.report.html", "pytest_sglang.report.baseline")
#: Also left out of an unused --collect-only run (benchmarks/bench_plugin_cost.py): recording outcomes.
HEAVY_AT_COLLECTION = ("pytest_sglang.plugin.results", "pytest_sglang.gates.base", "pytest_sglang.report.records")

#: What Windows lacks. Blocked before pytest starts, so an import (or attribute use) at plugin load or
#: configure fails the way it would there.
_BLOCK_POSIX = """
import os, signal, sys
for name in ("fcntl", "termios", "resource", "pwd", "grp", "pty", "tty"):
    sys.modules[name] = None
for attr in ("killpg", "setsid", "getpgid", "setpgrp", "fork"):
    if hasattr(os, attr):
        delattr(os, attr)
for attr in ("SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGALRM"):
    if hasattr(signal, attr):
        delattr(signal, attr)
import pytest
raise SystemExit(pytest.main())
"""


def test_public_api_is_curated() -> None:
    assert set(pytest_sglang.__all__) == EXPECTED_PUBLIC


@pytest.mark.parametrize("name", sorted(EXPECTED_PUBLIC - {"__version__", "SGLANG_VERSION"}))
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(pytest_sglang, name) is not None


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pytest_sglang.nope  # noqa: B018


def test_fixture_return_types_are_exported() -> None:
    assert pytest_sglang.LoadRunner is load_runner.LoadRunner
    assert pytest_sglang.GateResults is results.GateResults
    tree = ast.parse(Path(fixtures.__file__).read_text())
    returns = {f.name: ast.unparse(f.returns) for f in ast.walk(tree)
               if isinstance(f, ast.FunctionDef) and f.returns is not None}
    assert returns["sglang_load"] == "LoadRunner"
    assert returns["sglang_gate"] == "GateResults"


@pytest.mark.parametrize("method", [
    load_runner.LoadRunner.__init__, load_runner.LoadRunner.__call__, load_runner.LoadRunner.lock,
    results.GateResults.__init__, results.GateResults.record, results.GateResults.__getitem__,
])
def test_fixture_types_have_no_any_in_their_signatures(method: object) -> None:
    assert callable(method)
    annotations = [str(p.annotation) for p in inspect.signature(method).parameters.values()]
    annotations.append(str(inspect.signature(method).return_annotation))
    assert not [a for a in annotations if "Any" in a], annotations


def test_gate_results_attributes_are_typed() -> None:
    assert inspect.get_annotations(results.GateResults) == {
        "outcomes": "list[GateOutcome]", "loads": "list[LoadResult]", "item": "pytest.Item | None"}
    assert inspect.signature(vars(results.GateResults)["load"].fget).return_annotation == "LoadResult | None"


def test_load_runner_call_signature() -> None:
    signature = inspect.signature(load_runner.LoadRunner.__call__)
    assert str(signature) == ("(self, spec: 'LoadSpec | None' = None, *, server: 'Handle | None' = None, "
                              "**fields: 'object') -> 'LoadResult'")


def test_importing_the_plugin_stays_cheap() -> None:
    # pytest loads the plugin in every run of every project that installs us: keep heavy imports lazy.
    code = "import sys, json, pytest_sglang.plugin.hooks; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert _heavy(json.loads(out)) == []


@pytest.mark.parametrize("key", [None, "sk-in-the-environment-1"], ids=["no-key", "SGLANG_API_KEY"])
@pytest.mark.parametrize("args", [["--collect-only", "-q"], ["-q"]], ids=["collect-only", "run"])
def test_a_run_that_does_not_use_sglang_imports_nothing_heavy(tmp_path: Path, args: list[str],
                                                               key: str | None) -> None:
    """The whole plugin path of an unrelated project (load, options, configure, collection, the run).

    Also on a machine whose environment holds SGLANG_API_KEY (where SGLang runs): registering that
    secret must not build SGLang's flag reader (``pytest_sglang.sglang``) in every pytest run.
    """
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    code = ("import json, sys, pytest\n"
            "code = pytest.main(sys.argv[1:])\n"
            "print('MODULES=' + json.dumps(sorted(sys.modules)))\n"
            "raise SystemExit(code)\n")
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_API_KEY"} | ({"SGLANG_API_KEY": key} if key else {})
    run = subprocess.run([sys.executable, "-c", code, "-p", "no:cacheprovider", *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    modules = json.loads(run.stdout.split("MODULES=", 1)[1])
    assert "pytest_sglang.plugin.hooks" in modules  # the plugin was loaded...
    assert _heavy(modules) == []  # ...and cost no more than its option table and fixtures
    if "--collect-only" in args:  # the marker lines and the option table, nothing of the outcomes
        assert [m for m in HEAVY_AT_COLLECTION if m in modules] == []


def test_a_run_that_does_not_use_sglang_leaves_the_step_summary_alone(pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """In GitHub Actions every project with the package installed would get a "pytest-sglang gates" section."""
    summary = pytester.path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert summary.read_text() == "earlier step\n"
    assert "sglang gates" not in result.stdout.str()


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize("args", [["--help"], ["-q", "-p", "no:cacheprovider"],
                                  ["-q", "-p", "no:cacheprovider", "--sglang-url=http://127.0.0.1:9"]],
                         ids=["help", "run", "run-with-url"])
def test_the_plugin_loads_without_posix_only_modules(tmp_path: Path, args: list[str]) -> None:
    """Windows has no fcntl, termios, resource, os.killpg, SIGKILL, SIGHUP...: the plugin still loads."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    # Only our plugin and xdist (what we interact with): other installed plugins are not under test.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    run = subprocess.run([sys.executable, "-c", _BLOCK_POSIX, "-p", "xdist", "-p", "sglang", *args],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    if args == ["--help"]:
        assert "SGLang server acceptance gates (pytest-sglang):" in run.stdout
        assert "--sglang-url=URL" in run.stdout
    else:
        assert "1 passed" in run.stdout


def test_a_local_launch_without_process_groups_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Where a launch's process tree cannot be stopped (Windows), the launch says so; nothing starts."""
    from pytest_sglang.errors import ConfigError
    from pytest_sglang.server import LaunchConfig, runner

    monkeypatch.setattr(runner, "PROCESS_GROUPS", False)
    log = tmp_path / "server.log"
    with pytest.raises(ConfigError) as caught:
        runner.ProcessRunner().start(LaunchConfig(args=("--model-path", "m")), 30000, log)
    assert str(caught.value) == (
        f"LaunchConfig(runner='process')={sys.platform!r}: a local launch needs POSIX process groups "
        "(os.setsid/os.killpg) to stop the server and every process it started, and this platform has none. "
        "Fix: start the server separately and attach to it (start_server(url=...); in pytest --sglang-url), "
        "or launch it with runner='docker'")
    assert not log.exists()


def test_the_plugin_says_why_it_cannot_launch_here(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_sglang.server import runner

    monkeypatch.setattr(runner, "PROCESS_GROUPS", False)
    pytester.makepyfile("def test_needs_server(sglang_server):\n    pass\n")
    result = pytester.runpytest("--sglang-simulate", "-p", "no:cacheprovider")  # in-process: the patch applies
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*LaunchConfig(runner='simulator')=*: a local launch needs POSIX process groups*"])


def test_plugin_is_registered_and_can_be_disabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:sglang", "--trace-config")
    result.assert_outcomes(passed=1)
    assert "pytest_sglang/plugin/hooks.py" not in result.stdout.str()
    result = pytester.runpytest_subprocess("--trace-config")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*sglang*:*pytest_sglang/plugin/hooks.py"])


def test_cli_dispatcher_usage() -> None:
    run = subprocess.run([sys.executable, "-m", "pytest_sglang"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "usage: python -m pytest_sglang {load,plan,compare,eval,golden,trend,ab}" in run.stdout
    run = subprocess.run([sys.executable, "-m", "pytest_sglang", "frobnicate"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "unknown command 'frobnicate'" in run.stderr
