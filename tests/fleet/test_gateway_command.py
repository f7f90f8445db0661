"""Which gateway a fleet launches, and its argv (pytest_sglang/fleet/gateway.py), with the real executables."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

import pytest
from fleet_helpers import smg_command

from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.gateway import (
    GatewayCommand,
    GatewayMember,
    check_gateway_args,
    gateway_argv,
    resolve_command,
)


def test_default_is_smg_next_to_the_interpreter() -> None:
    command = resolve_command(None, sys.executable)
    assert command.argv == (str(Path(sys.executable).parent / "smg"), "launch")
    assert (command.flavor, command.version) == ("smg", "1.13.0")
    assert command.describe() == "smg 1.13.0"


def test_given_smg_is_asked_for_its_version() -> None:
    command = resolve_command(tuple(shlex.split(smg_command())))
    assert (command.flavor, command.version) == ("smg", "1.13.0")


def test_given_router_module(router_gateway_command: str) -> None:
    command = resolve_command(tuple(shlex.split(router_gateway_command)))
    # the version is read from the interpreter's installed sglang-router package
    assert (command.flavor, command.version, command.describe()) == ("sglang-router", "0.3.2", "sglang-router 0.3.2")


def test_router_wheels_smg_script_is_told_apart(router_gateway_command: str) -> None:
    # sglang-router's wheel installs an `smg` too; its --version says "sgl-model-gateway 0.3.2"
    script = Path(shlex.split(router_gateway_command)[0]).parent / "smg"
    command = resolve_command((str(script), "launch"))
    assert (command.flavor, command.version) == ("sglang-router", "0.3.2")


def test_router_module_when_no_smg_is_installed(router_gateway_command: str, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    # A copy of the router's venv without its `smg` script: the same site-packages, no smg next to python.
    python = Path(shlex.split(router_gateway_command)[0])
    venv = python.parent.parent
    (tmp_path / "bin").mkdir()
    alone = tmp_path / "bin" / "python"
    alone.symlink_to(python.resolve())
    (tmp_path / "lib").symlink_to(venv / "lib")
    (tmp_path / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text())
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    command = resolve_command(None, str(alone))
    assert command.argv == (str(alone), "-m", "sglang_router.launch_router")
    assert command.flavor == "sglang-router"


def test_no_gateway_at_all_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")  # finds no module
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"--sglang-workers.*a fleet needs SGLang's gateway and none is installed.*"
                                          r"pip install 'pytest-sglang\[gateway\]'"):
        resolve_command(None, str(fake))


def test_given_command_that_is_not_on_path() -> None:
    with pytest.raises(ConfigError, match=r"--sglang-gateway-command.*'no-such-gateway-xyz' is not an executable "
                                          r"on PATH.*pip install 'pytest-sglang\[gateway\]'"):
        resolve_command(("no-such-gateway-xyz", "launch"))


def test_given_unknown_executable_is_assumed_smg_without_version(tmp_path: Path) -> None:
    script = tmp_path / "my-gateway"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    command = resolve_command((str(script),))
    assert (command.flavor, command.version) == ("smg", None)


@pytest.mark.parametrize("args", [("--port", "1"), ("--worker-urls=http://x",), ("--policy", "random", "--host", "h"),
                                  ("--prometheus-port", "9"), ("--prometheus-host=0.0.0.0",)])
def test_flags_the_fleet_owns_are_refused(args: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match=r"--sglang-gateway=.* is set by pytest-sglang for a launched fleet.*"
                                          r"attach with --sglang-url"):
        check_gateway_args(args)


def test_other_gateway_flags_pass() -> None:
    check_gateway_args(("--policy", "cache_aware", "--health-check-interval-secs", "1", "--portal"))


def test_argv_of_a_regular_fleet() -> None:
    command = GatewayCommand(("smg", "launch"), "smg", "1.13.0")
    members = [GatewayMember("http://127.0.0.1:1"), GatewayMember("http://127.0.0.1:2")]
    argv = gateway_argv(command, host="127.0.0.1", port=30000, metrics_port=29001, members=members,
                        args=("--policy", "round_robin"))
    assert argv == ["smg", "launch", "--host", "127.0.0.1", "--port", "30000", "--prometheus-host", "127.0.0.1",
                    "--prometheus-port", "29001", "--worker-urls", "http://127.0.0.1:1", "http://127.0.0.1:2",
                    "--policy", "round_robin"]


def test_argv_of_a_prefill_decode_fleet() -> None:
    command = GatewayCommand(("smg", "launch"), "smg", None)
    members = [GatewayMember("http://p:1", "prefill", 8998), GatewayMember("http://p:2", "prefill"),
               GatewayMember("http://d:3", "decode")]
    argv = gateway_argv(command, host="h", port=1, metrics_port=2, members=members, args=())
    assert argv[argv.index("--prometheus-port") + 2:] == [
        "--pd-disaggregation", "--prefill", "http://p:1", "8998", "--prefill", "http://p:2", "none",
        "--decode", "http://d:3"]


def test_environment_is_restored() -> None:
    assert "PATH" in os.environ  # monkeypatched PATHs above must not leak
