"""What defines one launch (:class:`LaunchConfig`) and the argv a runner executes for it.

Two equal configs are the same server: the plugin's server factory reuses a running server when a
test asks for a config equal to one already launched, so every field that changes the server
(runner, args, command, interpreter, environment, docker options) is part of equality.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.args import find_flag

RUNNERS = ("process", "simulator", "docker")
VALIDATE_MODES = ("strict", "warn", "off")
#: Module run by the default command of each runner (``<python> -m MODULE ARGS``).
DEFAULT_MODULES = {"process": "sglang.launch_server", "simulator": "pytest_sglang.simulator"}
#: Hosts that mean "every interface": the server is then reached through the loopback address.
_WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


@dataclass(frozen=True)
class DockerOptions:
    """Docker runner options (parsed and turned into SDK keywords by ``server/docker.py``)."""

    image: str | None = None
    gpus: str = "all"
    shm_size: str = "32g"
    ipc_host: bool = True
    volumes: tuple[str, ...] = ()
    memory: str | None = None
    pull: str = "missing"
    network: str | None = None


@dataclass(frozen=True)
class LaunchConfig:
    """Everything that defines a launch (identical config -> the same, reusable server)."""

    runner: str = "process"
    args: tuple[str, ...] = ()
    command: tuple[str, ...] | None = None
    python: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    startup_timeout_s: float = 1800.0
    api_key: str | None = field(default=None, repr=False)  # a secret: never in repr()
    validate: str = "strict"
    preflight: bool = True
    host_memory_reserve_gb: float = 10.0
    log_dir: Path | None = None
    docker: DockerOptions | None = None

    def __post_init__(self) -> None:
        # Accept lists from callers but keep the dataclass hashable and truly frozen.
        object.__setattr__(self, "args", tuple(self.args))
        if self.command is not None:
            object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", tuple((str(k), str(v)) for k, v in self.env))
        if self.log_dir is not None:
            object.__setattr__(self, "log_dir", Path(self.log_dir))
        self._check()

    def _check(self) -> None:
        if self.runner not in RUNNERS:
            raise ConfigError("--sglang-runner", self.runner,
                              f"unknown runner; expected one of {', '.join(RUNNERS)}",
                              "use --sglang-runner process (real SGLang) or simulator (no GPU needed)")
        if self.validate not in VALIDATE_MODES:
            raise ConfigError("--sglang-validate", self.validate, "expected strict, warn or off",
                              "use --sglang-validate strict (default), warn or off")
        if not self.startup_timeout_s > 0:
            raise ConfigError("--sglang-startup-timeout", self.startup_timeout_s,
                              "must be greater than 0 seconds",
                              "give the whole start a deadline in seconds, e.g. "
                              "--sglang-startup-timeout 1800")
        if self.host_memory_reserve_gb < 0:
            raise ConfigError("--sglang-host-memory-reserve-gb", self.host_memory_reserve_gb, "must be >= 0",
                              "give the host memory to keep free in decimal GB, e.g. 10")
        if self.command is not None and not self.command:
            raise ConfigError("--sglang-command", "", "the command is empty",
                              "give a command prefix, e.g. --sglang-command 'python -m sglang.launch_server'")

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now (bind port 0 and read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def given_port(args: Sequence[str]) -> int | None:
    """The ``--port`` of the launch args, if any (a bad value is a ConfigError naming the flag)."""
    text = find_flag(args, "--port")
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError("--port", text, "not a port number", "give --port an integer, or leave it out "
                          "and pytest-sglang picks a free port") from None


def connect_host(args: Sequence[str]) -> str:
    """The address to reach the server at: its ``--host``, or loopback for a wildcard/absent host."""
    host = find_flag(args, "--host")
    if host is None or host in _WILDCARD_HOSTS:
        return "127.0.0.1"
    return host


def command_prefix(config: LaunchConfig) -> list[str]:
    """``config.command`` if given, else ``<python or sys.executable> -m <runner's module>``."""
    if config.command is not None:
        return list(config.command)
    module = DEFAULT_MODULES.get(config.runner, DEFAULT_MODULES["process"])
    return [config.python or sys.executable, "-m", module]


def address_args(args: Sequence[str], port: int) -> list[str]:
    """What to append so the server listens where we expect: nothing if ``--port`` is given."""
    if given_port(args) is not None:
        return []
    extra = [] if find_flag(args, "--host") is not None else ["--host", "127.0.0.1"]
    return [*extra, "--port", str(port)]


def effective_argv(config: LaunchConfig, port: int) -> list[str]:
    """The full argv of the server process: command prefix + user args + address flags."""
    return [*command_prefix(config), *config.args, *address_args(config.args, port)]


def pick_port(config: LaunchConfig) -> int:
    """The port the server will listen on: the user's ``--port``, else a free one."""
    port = given_port(config.args)
    return free_port() if port is None else port


def server_url(config: LaunchConfig, port: int) -> str:
    host = connect_host(config.args)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"
