"""LaunchConfig validation, equality (reuse) and the argv each runner executes."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.server.config import DockerOptions, LaunchConfig, effective_argv, pick_port, server_url


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


def test_bad_port_is_refused_when_the_config_is_made() -> None:
    with pytest.raises(ConfigError) as info:
        LaunchConfig(args=("--port", "abc"))
    assert str(info.value).startswith("LaunchConfig.args='--port abc': SGLang would reject these launch args "
                                      "(argument --port: invalid int value: 'abc'). Fix: use SGLang 0.5.23 flag")
    with pytest.raises(ConfigError, match=r"^--port=99999: not a TCP port \(1-65535\)\. Fix: give --port"):
        pick_port(LaunchConfig(args=("--port", "99999")))


def test_host_and_port_in_every_spelling_sglang_accepts() -> None:
    # --po and --ho are SGLang's own abbreviations of --port and --host (argparse prefix matching).
    config = LaunchConfig(args=("--model-path", "m", "--ho=127.0.0.3", "--po", "31001"))
    assert pick_port(config) == 31001
    assert server_url(config, 31001) == "http://127.0.0.3:31001"
    assert effective_argv(config, 5)[-3:] == ["--ho=127.0.0.3", "--po", "31001"]  # nothing appended
    assert config.args_without("host", "port") == ["--model-path", "m"]


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
            "LaunchConfig.runner='kubernetes': unknown runner; expected one of process, simulator, "
            "docker. Fix: use LaunchConfig(runner=...) process",
        ),
        (
            {"validate": "loose"},
            "LaunchConfig.validate='loose': expected strict, warn or off. Fix: use LaunchConfig(validate=...) "
            "strict",
        ),
        (
            {"startup_timeout_s": 0},
            "LaunchConfig.startup_timeout_s=0: must be a finite number of seconds > 0. Fix: give "
            "LaunchConfig(startup_timeout_s=...) one deadline",
        ),
        (
            {"host_memory_reserve_gb": -1},
            "LaunchConfig.host_memory_reserve_gb=-1: must be a finite number >= 0. Fix: give "
            "LaunchConfig(host_memory_reserve_gb=...)",
        ),
        ({"command": ()}, "LaunchConfig.command='': the command is empty. Fix: give LaunchConfig(command=...) a"),
        ({"args": ("--pp", "2")}, "LaunchConfig.args='--pp 2': SGLang would reject these launch args (ambiguous "
                                  "option: --pp could match --pp-size, "),
        ({"command": ("python", "-m", "sglang.launch_server", "--tp", "x"), "args": ("--model-path", "m")},
         "LaunchConfig.command='python -m sglang.launch_server --tp x': SGLang would reject these launch args "
         "(argument --tp-size/--tensor-parallel-size: invalid int value: 'x')"),
    ],
)
def test_engine_errors_name_the_field_value_and_fix(kwargs: dict[str, object], message: str) -> None:
    """The engine speaks its own words (a LaunchConfig field), never a plugin option."""
    with pytest.raises(ConfigError) as info:
        LaunchConfig(**kwargs)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)
    assert "--sglang-" not in str(info.value)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"args": "--model-path m --api-key sk-in-a-string-7f"},
     "LaunchConfig.args='<str>': expected a list of strings (not one string), got str. Fix: give "
     "LaunchConfig(args=...) a list such as ['--model-path', 'M'] (shlex.split a command line)"),
    ({"args": ["--model-path", 7]}, "LaunchConfig.args='<list>': expected a list of strings"),
    ({"command": "python -m sglang.launch_server"},
     "LaunchConfig.command='<str>': expected a list of strings (not one string) or None, got str"),
    ({"runner": None}, "LaunchConfig.runner=None: expected a string, got NoneType. Fix: give "
                       "LaunchConfig(runner=...) a string"),
    ({"python": 3}, "LaunchConfig.python=3: expected a string or None, got int"),
    ({"api_key": b"sk-bytes-key-7f"}, "LaunchConfig.api_key='<bytes>': expected a string or None, got bytes"),
    ({"env": {"HF_TOKEN": 7}}, "LaunchConfig.env='<tuple>': expected a list of (string, string) pairs"),
    ({"env": 5}, "LaunchConfig.env='<int>': expected a list of (string, string) pairs"),
    ({"env": (("A",),)}, "LaunchConfig.env='<tuple>': expected a list of (string, string) pairs, got tuple"),
    ({"startup_timeout_s": "600"}, "LaunchConfig.startup_timeout_s='600': expected a number, got str"),
    ({"startup_timeout_s": float("inf")}, "LaunchConfig.startup_timeout_s=inf: must be a finite number of seconds"),
    ({"startup_timeout_s": True}, "LaunchConfig.startup_timeout_s=True: expected a number, got bool"),
    ({"host_memory_reserve_gb": float("nan")}, "LaunchConfig.host_memory_reserve_gb=nan: must be a finite number"),
    ({"preflight": "no"}, "LaunchConfig.preflight='no': expected True or False, got str"),
    ({"log_dir": 5}, "LaunchConfig.log_dir=5: expected a path or None, got int"),
    ({"docker": "lmsysorg/sglang"}, "LaunchConfig.docker='lmsysorg/sglang': expected a DockerOptions or None"),
    ({"ray": "auto"}, "LaunchConfig.ray='auto': expected a RayOptions or None, got str"),
])
def test_a_field_of_the_wrong_type_is_named_without_its_secrets(kwargs: dict[str, object], message: str) -> None:
    """Not a TypeError from inside (``'>' not supported``), nor a string split into characters."""
    with pytest.raises(ConfigError) as info:
        LaunchConfig(**{"args": ("--model-path", "m"), **kwargs})  # type: ignore[arg-type]
    assert str(info.value).startswith(message), str(info.value)
    assert "7f" not in str(info.value)


def test_env_may_be_a_mapping() -> None:
    config = LaunchConfig(args=("--model-path", "m"), env={"HF_HOME": "/models"})
    assert config.env == (("HF_HOME", "/models"),) and hash(config)


SECRET = "sk-repr-never-shown-51c2"


def test_repr_and_str_mask_every_secret() -> None:
    config = LaunchConfig(
        runner="simulator", args=("--model-path", "m", "--api-ke", SECRET), api_key=SECRET,
        command=("python", "-m", "pytest_sglang.simulator", "--admin-api-key=adm-" + SECRET),
        env=(("HF_TOKEN", "hf-" + SECRET), ("MYSQL_PWD", "pw-" + SECRET), ("CUDA_VISIBLE_DEVICES", "0")),
        docker=DockerOptions(volumes=("/data:/data:ro",)))
    for text in (repr(config), str(config), repr(config.launch_args), repr(config.docker)):
        assert SECRET not in text
    assert "args=('--model-path', 'm', '--api-ke', '***')" in repr(config)
    assert "'--admin-api-key=***'" in repr(config) and "api_key='***'" in repr(config)
    assert "('HF_TOKEN', '***'), ('MYSQL_PWD', '***'), ('CUDA_VISIBLE_DEVICES', '0')" in repr(config)


def test_the_servers_own_key_is_what_clients_send() -> None:
    # SGLang reads --api-ke as --api-key: the plugin authenticates with it unless --sglang-api-key is given.
    assert LaunchConfig(args=("--api-ke", SECRET)).client_api_key == SECRET
    assert LaunchConfig(args=("--api-ke", SECRET), api_key="given-key").client_api_key == "given-key"
    in_command = LaunchConfig(command=("python", "-m", "sglang.launch_server", "--api-key", SECRET))
    assert in_command.client_api_key == SECRET and SECRET in in_command.secrets
    assert LaunchConfig(env=(("HF_TOKEN", "hf-value-123"),)).secrets == ("hf-value-123",)


def test_a_config_registers_its_secrets_when_made() -> None:
    from pytest_sglang import redaction

    redaction.clear()
    try:
        LaunchConfig(args=("--model-path", "m", "--api-key=" + SECRET))
        assert redaction.scrub(f"server_args={{'api_key': '{SECRET}'}}") == "server_args={'api_key': '***'}"
    finally:
        redaction.clear()


@pytest.mark.parametrize(("field", "value", "message"), [
    ("sglang_runner", "k8s", "--sglang-runner='k8s': unknown runner; expected one of process, simulator, docker. "
                             "Fix: use --sglang-runner process (real SGLang) or simulator (no GPU needed)"),
    ("sglang_command", ("python", "-m", "sglang.launch_server", "--tp", "x"),
     "--sglang-command='python -m sglang.launch_server --tp x': SGLang would reject these launch args"),
    ("sglang_launch", ("--pp", "2", "--api-key", SECRET),
     "--sglang-launch='--pp 2 --api-key ***': SGLang would reject these launch args (ambiguous option"),
    ("sglang_gpus", "0", "--sglang-gpus='0': a bare number is a GPU count and 0 GPUs is 'none'. Fix: give "
                         "--sglang-gpus all, none"),
])
def test_the_plugin_rewords_engine_errors_for_its_options(field: str, value: object, message: str,
                                                          tmp_path: object) -> None:
    """Settings that bypass the option rows' checks still get option names, never LaunchConfig fields."""
    from pathlib import Path

    from pytest_sglang.plugin.launch_config import launch_config
    from pytest_sglang.plugin.settings import resolve

    given: dict[str, object] = {"sglang_runner": "docker", "sglang_launch": ("--model-path", "m"), field: value}
    settings = dataclasses.replace(resolve({}, {}, {}), **given)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        launch_config(settings, Path(str(tmp_path)))
    assert str(info.value).startswith(message)
    assert "LaunchConfig" not in str(info.value) and "DockerOptions" not in str(info.value)
    assert SECRET not in str(info.value)
