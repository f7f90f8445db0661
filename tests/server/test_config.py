"""LaunchConfig validation, equality (reuse) and the argv each runner executes."""

from __future__ import annotations

import sys

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.server.config import LaunchConfig, effective_argv, pick_port, server_url


def test_process_runner_default_command_appends_loopback_and_port() -> None:
    config = LaunchConfig(runner="process", args=("--model-path", "m"))
    assert effective_argv(config, 4242) == [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--host",
        "127.0.0.1",
        "--port",
        "4242",
    ]


def test_simulator_runner_uses_python_option() -> None:
    config = LaunchConfig(runner="simulator", args=["--sim-profile", "tiny"], python="/opt/sgl/bin/python")
    assert effective_argv(config, 1)[:3] == ["/opt/sgl/bin/python", "-m", "pytest_sglang.simulator"]


def test_command_replaces_the_prefix_only() -> None:
    config = LaunchConfig(command=("sglang", "serve"), args=("--tp", "2"))
    assert effective_argv(config, 7) == ["sglang", "serve", "--tp", "2", "--host", "127.0.0.1", "--port", "7"]


def test_given_port_and_host_are_respected() -> None:
    config = LaunchConfig(args=("--host", "0.0.0.0", "--port", "31000"))
    assert effective_argv(config, 5)[-4:] == ["--host", "0.0.0.0", "--port", "31000"]
    assert pick_port(config) == 31000
    assert server_url(config, 31000) == "http://127.0.0.1:31000"  # wildcard host: reach it via loopback


def test_given_host_without_port_gets_only_a_port() -> None:
    config = LaunchConfig(args=("--host=127.0.0.2",))
    assert effective_argv(config, 9)[-3:] == ["--host=127.0.0.2", "--port", "9"]
    assert server_url(config, 9) == "http://127.0.0.2:9"


def test_free_port_is_picked_when_absent() -> None:
    port = pick_port(LaunchConfig())
    assert 1024 < port < 65536


def test_bad_port_names_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"--port='abc': not a port number\. Fix: give --port an integer"):
        pick_port(LaunchConfig(args=("--port", "abc")))


def test_equal_configs_are_the_same_server_and_lists_are_accepted() -> None:
    a = LaunchConfig(runner="simulator", args=["--x", "1"], env=[("A", "1")])
    b = LaunchConfig(runner="simulator", args=("--x", "1"), env=(("A", "1"),))
    assert a == b and hash(a) == hash(b)
    assert a != LaunchConfig(runner="simulator", args=("--x", "2"), env=(("A", "1"),))
    assert a != LaunchConfig(runner="process", args=("--x", "1"), env=(("A", "1"),))


def test_repr_never_shows_the_api_key() -> None:
    assert "s3cr3t-key" not in repr(LaunchConfig(api_key="s3cr3t-key"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"runner": "kubernetes"},
            "--sglang-runner='kubernetes': unknown runner; expected one of process, simulator, "
            "docker. Fix: use --sglang-runner process",
        ),
        (
            {"validate": "loose"},
            "--sglang-validate='loose': expected strict, warn or off. Fix: use --sglang-validate",
        ),
        (
            {"startup_timeout_s": 0},
            "--sglang-startup-timeout=0: must be greater than 0 seconds. Fix: give the whole",
        ),
        (
            {"host_memory_reserve_gb": -1},
            "--sglang-host-memory-reserve-gb=-1: must be >= 0. Fix: give the host",
        ),
        ({"command": ()}, "--sglang-command='': the command is empty. Fix: give a command prefix"),
    ],
)
def test_bad_values_name_option_value_and_fix(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LaunchConfig(**kwargs)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)
