"""The option surface: --help golden, --markers, and the precedence CLI > env > ini > default."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang.plugin import settings
from pytest_sglang.plugin.hooks import SETTINGS_KEY

GOLDEN = Path(__file__).parent / "golden" / "help_sglang.txt"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in settings.OPTIONS:
        monkeypatch.delenv(option.env, raising=False)
    monkeypatch.delenv("SGLANG_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "100")


def resolved(pytester: pytest.Pytester, *args: str) -> settings.Settings:
    config = pytester.parseconfigure(*args)
    return config.stash[SETTINGS_KEY]


def sglang_help_section(text: str) -> str:
    lines = text.splitlines()
    start = lines.index("SGLang server acceptance gates (pytest-sglang):")
    end = lines.index("", start)
    return "\n".join(lines[start:end]) + "\n"


def test_help_golden(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert result.ret == 0
    section = sglang_help_section(result.stdout.str())
    # The golden is the contract: regenerate it deliberately when an option changes.
    assert section == GOLDEN.read_text()


def test_help_lists_every_option_and_ini_key(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--help").stdout.str()
    for option in settings.OPTIONS:
        assert f"  {option.cli}" in out
        if not option.cli_only:
            assert f"  {option.name} (" in out
    assert "  --no-sglang-ipc-host  turn off --sglang-ipc-host" in out


def test_markers_list_every_gate_with_signature_and_docs(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines([
        "@pytest.mark.sglang_capacity(*, min_total_tokens=None, *): fail unless the server's KV capacity*",
        "@pytest.mark.sglang_hicache(*, enabled=True, *",
        "@pytest.mark.sglang_throughput(*, min_output_tok_s=None, *See https://*#markers",
        "@pytest.mark.sglang_slo(*, *min_concurrency*): find the highest concurrency*",
    ])


def test_defaults(pytester: pytest.Pytester) -> None:
    s = resolved(pytester)
    assert (s.sglang_startup_timeout, s.sglang_validate, s.sglang_ipc_host, s.sglang_simulate) == (
        1800.0, "strict", True, False)
    assert s.mode is None and s.sources == {}


@pytest.mark.parametrize("value", ["60", "60.0"])
def test_pytest_ini(pytester: pytest.Pytester, value: str) -> None:
    pytester.makeini(f"[pytest]\nsglang_startup_timeout = {value}\nsglang_ipc_host = false\n"
                     "sglang_env =\n    A=1\n    B=2\n")
    s = resolved(pytester)
    assert s.sglang_startup_timeout == 60.0 and s.sglang_ipc_host is False
    assert s.sglang_env == ("A=1", "B=2")
    assert s.describe_source("sglang_startup_timeout") == "ini"


@pytest.mark.parametrize("table", ["[tool.pytest.ini_options]", "[tool.pytest]"])
@pytest.mark.parametrize("value", ["60", '"60"', "60.0"])
def test_pyproject_quoted_and_unquoted_numbers(pytester: pytest.Pytester, table: str, value: str) -> None:
    pytester.makepyprojecttoml(f"{table}\nsglang_startup_timeout = {value}\n"
                               "sglang_host_memory_reserve_gb = 0\nsglang_gpus = 2\n"
                               'sglang_simulate = true\nsglang_env = ["A=1"]\n')
    s = resolved(pytester)
    assert s.sglang_startup_timeout == 60.0
    assert s.sglang_host_memory_reserve_gb == 0.0  # a valid falsy value is not "unset"
    assert s.sglang_gpus == "2" and s.sglang_simulate is True and s.sglang_env == ("A=1",)
    assert s.mode == "launch" and s.runner == "simulator"


def test_env_beats_ini_and_cli_beats_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\nsglang_startup_timeout = 60\nsglang_simulate = true\n"
                     "sglang_ipc_host = true\n")
    monkeypatch.setenv("PYTEST_SGLANG_STARTUP_TIMEOUT", "30")
    monkeypatch.setenv("PYTEST_SGLANG_SIMULATE", "0")
    monkeypatch.setenv("PYTEST_SGLANG_IPC_HOST", "1")
    monkeypatch.setenv("PYTEST_SGLANG_ENV", "A=1 B=2")
    s = resolved(pytester)
    assert (s.sglang_startup_timeout, s.sglang_simulate, s.sglang_ipc_host) == (30.0, False, True)
    assert s.sglang_env == ("A=1", "B=2")
    assert s.describe_source("sglang_startup_timeout") == "env PYTEST_SGLANG_STARTUP_TIMEOUT"
    s = resolved(pytester, "--sglang-startup-timeout=10", "--sglang-simulate", "--no-sglang-ipc-host",
                 "--sglang-env", "C=3", "--sglang-env", "D=4")
    assert (s.sglang_startup_timeout, s.sglang_simulate, s.sglang_ipc_host) == (10.0, True, False)
    assert s.sglang_env == ("C=3", "D=4")
    assert s.describe_source("sglang_simulate") == "cli"


def test_api_key_alias_and_url_wins_over_launch(pytester: pytest.Pytester,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_API_KEY", "alias-key-123")
    s = resolved(pytester, "--sglang-url=http://127.0.0.1:1", "--sglang-launch=--model-path m")
    assert s.sglang_api_key == "alias-key-123" and s.describe_source("sglang_api_key") == "env SGLANG_API_KEY"
    assert s.mode == "attach" and s.launch_args == ("--model-path", "m")
    monkeypatch.setenv("PYTEST_SGLANG_API_KEY", "own-key-456")
    assert resolved(pytester).sglang_api_key == "own-key-456"


def test_simulate_has_a_working_default_launch(pytester: pytest.Pytester) -> None:
    s = resolved(pytester, "--sglang-simulate")
    assert s.launch_args == settings.SIMULATE_DEFAULT_LAUNCH and s.runner == "simulator"
    s = resolved(pytester, "--sglang-simulate", "--sglang-launch", "--model-path x --sim-profile tiny")
    assert s.launch_args == ("--model-path", "x", "--sim-profile", "tiny")


@pytest.mark.parametrize(("where", "expected"), [
    ("cli", "ERROR: --sglang-startup-timeout='soon': expected a number, e.g. 900 or 2.5. Fix: give "
            "--sglang-startup-timeout a valid value "
            "(one deadline in seconds for the whole start (default 1800))"),
    ("env", "ERROR: env PYTEST_SGLANG_STARTUP_TIMEOUT='soon': expected a number, e.g. 900 or 2.5. Fix: *"),
    ("ini", "ERROR: ini option sglang_startup_timeout='soon': expected a number, e.g. 900 or 2.5. Fix: *"),
])
def test_bad_value_names_its_source(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                    where: str, expected: str) -> None:
    args: list[str] = []
    if where == "cli":
        args = ["--sglang-startup-timeout=soon"]
    elif where == "env":
        monkeypatch.setenv("PYTEST_SGLANG_STARTUP_TIMEOUT", "soon")
    else:
        pytester.makeini("[pytest]\nsglang_startup_timeout = soon\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


@pytest.mark.parametrize(("args", "expected"), [
    (["--sglang-validate=loose"],
     "ERROR: --sglang-validate='loose': must be one of strict, warn, off. Fix: *"),
    (["--sglang-runner=k8s"],
     "ERROR: --sglang-runner='k8s': must be one of process, simulator, docker. Fix: *"),
    (["--sglang-env=NOEQUALS"], "ERROR: --sglang-env='NOEQUALS': expected KEY=VALUE. Fix: *"),
    (["--sglang-launch=--model-path 'unclosed"],
     "ERROR: --sglang-launch=\"--model-path 'unclosed\": cannot be split like a shell command line*"),
    (["--sglang-host-memory-reserve-gb=-1"],
     "ERROR: --sglang-host-memory-reserve-gb='-1': must be a number >= 0*"),
])
def test_bad_cli_values(pytester: pytest.Pytester, args: list[str], expected: str) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_bad_ini_flag_names_the_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsglang_simulate = maybe\n")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["ERROR: ini option sglang_simulate='maybe': expected one of true/false*"])


def test_docs_table_lists_every_option() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "plugin.md").read_text()
    for option in settings.OPTIONS:
        assert f"| `{option.cli}`" in docs
        if not option.cli_only:
            assert f"`{option.env}`" in docs and f"`{option.name}`" in docs
