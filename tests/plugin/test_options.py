"""The option surface: --help golden, --markers, the precedence CLI > env > ini > default, each
setting declared once (its row), conflicting settings, and bad values refused at configure time."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang import defaults
from pytest_sglang.gates.registry import GATES
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


def _plain(annotation: Any) -> str:
    """``Annotated[int | None, AtLeast(1)]`` -> ``int | None``: the type without its constraints."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def _signature_line(marker: str, fn: Any) -> str:
    """The keywords as ``inspect.signature`` reads them (independent of the plugin's own rendering)."""
    params = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
              if p.kind is inspect.Parameter.KEYWORD_ONLY]
    shown = [f"{p.name}: {_plain(p.annotation)}" + ("" if p.default is p.empty else f" = {p.default!r}")
             for p in params]
    return f"@pytest.mark.{marker}(*, {', '.join(shown)}): "


def test_markers_show_each_gate_exactly_as_its_signature(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--markers").stdout.str()
    for gate in GATES:
        line = next((x for x in out.splitlines() if x.startswith(f"@pytest.mark.{gate.marker}(")), "")
        assert line.startswith(_signature_line(gate.marker, gate.load())), line
        assert line.endswith(f"{gate.summary} See "
                             "https://github.com/pytest-sglang/pytest-sglang/blob/main/docs/plugin.md#markers")


def test_markers_are_registered_without_importing_the_gates(pytester: pytest.Pytester) -> None:
    # The full signature needs the load generator; a plain run must not pay for it.
    pytester.makeconftest("import sys\n"
                          "def pytest_collection_finish(session):\n"
                          "    print('LOADGEN', 'pytest_sglang.loadgen' in sys.modules)\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("-s", "--strict-markers", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["LOADGEN False"])
    result.assert_outcomes(passed=1)


def test_defaults(pytester: pytest.Pytester) -> None:
    s = resolved(pytester)
    assert (s.sglang_startup_timeout, s.sglang_validate, s.sglang_ipc_host, s.sglang_simulate) == (
        defaults.DEFAULT_STARTUP_TIMEOUT_S, "strict", True, False)
    assert s.mode is None and s.sources == {} and s.notes == ()


def test_each_setting_is_declared_once_in_its_row() -> None:
    """Settings fields carry no defaults: every default comes from its row, typed as the field."""
    from pytest_sglang.server.url import ServerURL  # a type-checking-only name of settings.py

    hints = typing.get_type_hints(settings.Settings, localns={"ServerURL": ServerURL})
    fields = {f.name: f for f in dataclasses.fields(settings.Settings)}
    resolved_defaults = settings.resolve({}, {}, {})
    for option in settings.OPTIONS:
        field = fields[option.name]
        assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING, (
            f"Settings.{option.name} repeats a default: declare it in the row only")
        assert _is_instance(option.default, hints[option.name]), option.name
        assert getattr(resolved_defaults, option.name) == option.default
    assert set(fields) - {o.name for o in settings.OPTIONS} == {"sources", "notes"}


def _is_instance(value: object, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if origin in (typing.Union, __import__("types").UnionType):
        return any(_is_instance(value, arg) for arg in typing.get_args(hint))
    return value is None if hint is type(None) else isinstance(value, hint)


def test_engine_defaults_are_the_rows_defaults() -> None:
    from pytest_sglang.server.config import DockerOptions, LaunchConfig

    rows = settings.OPTIONS_BY_NAME
    launch, docker = LaunchConfig(), DockerOptions()
    assert rows["sglang_startup_timeout"].default == launch.startup_timeout_s
    assert rows["sglang_validate"].default == launch.validate
    assert rows["sglang_host_memory_reserve_gb"].default == launch.host_memory_reserve_gb
    assert rows["sglang_runner"].default == launch.runner
    assert (rows["sglang_gpus"].default, rows["sglang_shm_size"].default, rows["sglang_ipc_host"].default,
            rows["sglang_pull"].default) == (docker.gpus, docker.shm_size, docker.ipc_host, docker.pull)
    # the help says the default, taken from the row (never written by hand)
    assert rows["sglang_startup_timeout"].help_text.endswith(
        f"(default {defaults.DEFAULT_STARTUP_TIMEOUT_S:g})")
    assert rows["sglang_shm_size"].help_text.endswith(f"(default {defaults.DEFAULT_SHM_SIZE})")


def test_ini_types_come_from_the_rows(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.pytest]\nsglang_startup_timeout = 60\nsglang_no_preflight = true\n")
    config = pytester.parseconfigure()
    assert config.getini("sglang_startup_timeout") == 60  # a TOML number, accepted as such
    assert config.getini("sglang_no_preflight") is True


def test_settings_repr_masks_every_secret() -> None:
    s = settings.resolve({"sglang_api_key": "sk-repr-secret-1", "sglang_env": ["HF_TOKEN=hf-repr-secret-2"],
                          "sglang_launch": "--model-path m --api-ke sk-repr-secret-3"}, {}, {})
    attached = settings.resolve({"sglang_url": "http://user:pw-repr-secret-4@h:1"}, {}, {})
    text = repr(s) + str(s) + repr([s]) + repr(attached)
    for secret in ("sk-repr-secret-1", "hf-repr-secret-2", "sk-repr-secret-3", "pw-repr-secret-4"):
        assert secret not in text
    assert "sglang_api_key='***'" in text and "'HF_TOKEN=***'" in text
    assert s.secrets() == ("sk-repr-secret-1",)


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


def test_api_key_alias(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_API_KEY", "alias-key-123")
    s = resolved(pytester, "--sglang-url=http://127.0.0.1:1")
    assert s.sglang_api_key == "alias-key-123" and s.describe_source("sglang_api_key") == "env SGLANG_API_KEY"
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


# ---- contradicting settings: the higher source wins (said in the header); the same level is an error
@pytest.mark.parametrize(("args", "env", "ini", "expected"), [
    (["--sglang-simulate", "--sglang-runner=docker"], {}, "",
     "ERROR: --sglang-runner (cli)='docker': contradicts --sglang-simulate (cli), which selects the simulator "
     "runner; both come from the command line, so neither wins. Fix: give only one: --sglang-runner docker "
     "to launch real SGLang, or --sglang-simulate to launch the simulator"),
    ([], {"PYTEST_SGLANG_SIMULATE": "1", "PYTEST_SGLANG_RUNNER": "process"}, "",
     "ERROR: --sglang-runner (env PYTEST_SGLANG_RUNNER)='process': contradicts --sglang-simulate "
     "(env PYTEST_SGLANG_SIMULATE), *both come from the environment*"),
    (["--sglang-url=http://user:pw-secret-7@127.0.0.1:1", "--sglang-launch=--model-path m"], {}, "",
     "ERROR: --sglang-url (cli)='http://user:***@127.0.0.1:1': contradicts --sglang-launch (cli), which launches "
     "a server; both come from the command line, so neither wins. Fix: give only one: --sglang-url URL to "
     "attach to a running server, or --sglang-launch to launch one"),
    ([], {}, "sglang_url = http://127.0.0.1:1\nsglang_simulate = true\n",
     "ERROR: --sglang-url (ini)='http://127.0.0.1:1': contradicts --sglang-simulate (ini), which launches a "
     "server; both come from the ini file, *"),
])
def test_contradicting_settings_from_one_level_are_a_usage_error(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str],
        ini: str, expected: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if ini:
        pytester.makeini("[pytest]\n" + ini)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert "pw-secret-7" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize(("args", "env", "ini", "mode", "runner", "note"), [
    (["--sglang-runner=docker", "--sglang-launch=--model-path m"], {}, "sglang_simulate = true\n",
     "launch", "docker", "sglang: --sglang-runner (cli) wins over --sglang-simulate (ini) (the higher source wins)"),
    (["--sglang-simulate"], {}, "sglang_runner = process\n", "launch", "simulator",
     "sglang: --sglang-simulate (cli) wins over --sglang-runner (ini) (the higher source wins)"),
    (["--sglang-url=http://127.0.0.1:1"], {}, "sglang_launch = --model-path m\n", "attach", "process",
     "sglang: --sglang-url (cli) wins over --sglang-launch (ini) (the higher source wins): attaching, nothing "
     "is launched"),
    (["--sglang-simulate"], {"PYTEST_SGLANG_URL": "http://127.0.0.1:1"}, "", "launch", "simulator",
     "sglang: --sglang-simulate (cli) wins over --sglang-url (env PYTEST_SGLANG_URL) (the higher source wins): "
     "launching, the URL is not used"),
])
def test_contradicting_settings_from_two_levels_say_which_won(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str],
        ini: str, mode: str, runner: str, note: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makeini("[pytest]\n" + ini)
    s = resolved(pytester, *args)
    assert (s.mode, s.runner) == (mode, runner)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--collect-only", *args)
    result.stdout.fnmatch_lines([note])


@pytest.mark.parametrize(("args", "note"), [
    (["--sglang-url=http://127.0.0.1:1", "--sglang-image=img:1", "--sglang-no-preflight"],
     "sglang: not used when attaching to --sglang-url: --sglang-no-preflight (cli), --sglang-image (cli)"),
    (["--sglang-simulate", "--sglang-shm-size=1g"],
     "sglang: not used without --sglang-runner docker: --sglang-shm-size (cli)"),
    (["--sglang-runner=docker"],
     "sglang: not used as nothing is launched (no --sglang-launch ARGS): --sglang-runner (cli)"),
])
def test_settings_that_do_nothing_are_named_in_the_header(pytester: pytest.Pytester, args: list[str],
                                                          note: str) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--collect-only", *args)
    assert result.ret == 0
    result.stdout.fnmatch_lines([note])
    for hidden in ("-q", "--no-header"):  # no header to say it: the summary does, once
        quiet = pytester.runpytest("--collect-only", hidden, *args)
        assert quiet.stdout.str().count(note) == 1, quiet.stdout.str()


# ---- every option is parsed at configure time ---------------------------------------------------
@pytest.mark.parametrize(("args", "expected"), [
    (["--sglang-startup-timeout=nan"], "ERROR: --sglang-startup-timeout='nan': expected a finite number*"),
    (["--sglang-startup-timeout=inf"], "ERROR: --sglang-startup-timeout='inf': expected a finite number*"),
    (["--sglang-host-memory-reserve-gb=nan"],
     "ERROR: --sglang-host-memory-reserve-gb='nan': expected a finite number*"),
    (["--sglang-launch=--model-path m --tp abc"],
     "ERROR: --sglang-launch='--model-path m --tp abc': SGLang would reject these launch args (*invalid int "
     "value: 'abc')*"),
    (["--sglang-launch=--model-path m --api-ke sk-launch-secret-5 --pp 2"],
     "ERROR: --sglang-launch='--model-path m --api-ke *** --pp 2': SGLang would reject these launch args "
     "(ambiguous option: --pp could match*"),
    (["--sglang-launch="], "ERROR: --sglang-launch='': is empty*"),
    (["--sglang-python="], "ERROR: --sglang-python='': is empty. Fix: give --sglang-python a valid value*"),
    (["--sglang-report=a\x01b.json"], "ERROR: --sglang-report='a\\x01b.json': contains the control character*"),
    (["--sglang-api-key=sk-api-secret-6\x02"], "ERROR: --sglang-api-key='***': contains the control character*"),
    (["--sglang-run-label=" + "x" * 101],
     "ERROR: --sglang-run-label='xxx*': is 101 characters long, more than 100: give a commit or a version*"),
    (["--sglang-run-label=abc\ndef"], "ERROR: --sglang-run-label='abc\\ndef': contains the control character*"),
    (["--sglang-run-label=   "], "ERROR: --sglang-run-label='   ': is empty*"),
    (["--sglang-max-regression=5 percent"],
     "ERROR: --sglang-max-regression='5 percent': cannot read '5 percent'. Fix: write a percentage like 5%*"),
])
def test_every_option_is_checked_at_configure_time(pytester: pytest.Pytester, args: list[str],
                                                   expected: str) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--collect-only", *args)  # nothing is started: the check is in configure
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    out = result.stdout.str() + result.stderr.str()
    assert "sk-launch-secret-5" not in out and "sk-api-secret-6" not in out and "Traceback" not in out


def test_a_bad_env_value_names_the_env_variable(pytester: pytest.Pytester,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_SGLANG_MAX_REGRESSION", "bogus")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: env PYTEST_SGLANG_MAX_REGRESSION='bogus': cannot read 'bogus'*"])


def test_every_row_parses_its_values() -> None:
    """No row takes text unchecked: empty text and control characters are refused by every row."""
    for option in settings.OPTIONS:
        if option.kind in ("flag", "negatable"):
            continue
        for bad in ("", "\x00"):
            with pytest.raises(settings.ConfigError) as exc:
                settings.resolve({option.name: [bad] if option.kind == "list" else bad}, {}, {})
            assert str(exc.value).startswith(option.cli), (option.name, bad)
