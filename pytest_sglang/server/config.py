"""What defines one launch (:class:`LaunchConfig`) and the argv a runner executes for it.

Two equal configs are the same server: the plugin's server factory reuses a running server when a
test asks for a config equal to one already launched, so every field that changes the server
(runner, args, command, interpreter, environment, docker options) is part of equality.

A launch's args are read once, as SGLang will (:func:`read_launch`): the option row that refuses a typo,
the header, the markers' needs, :attr:`LaunchConfig.launch_args` (port and host, the secrets, the API key
clients send) and the report's fingerprint all take that one result. Errors speak the
engine's words (``LaunchConfig.runner``); the plugin re-words them for its options
(:meth:`LaunchConfigError.for_option`).
"""

from __future__ import annotations

import importlib.util
import math
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from pytest_sglang import defaults, redaction
from pytest_sglang.errors import ConfigError, LaunchConfigError
from pytest_sglang.fieldtypes import wrong_type
from pytest_sglang.server.options import docker as docker_options
from pytest_sglang.server.options.ray import RayOptions
from pytest_sglang.sglang.args import LaunchArgs, command_flags, display_argv, display_launch, parse_launch_args
from pytest_sglang.sockets import free_port

RUNNERS = defaults.RUNNERS
VALIDATE_MODES = defaults.VALIDATE_MODES
#: Module run by the default command of each runner (``<python> -m MODULE ARGS``).
DEFAULT_MODULES = {"process": "sglang.launch_server", "simulator": "pytest_sglang.simulator"}
#: Hosts that mean "every interface": the server is then reached through the loopback address.
_WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


#: Each launch read so far, by (the command's own flags, the args): the one parse every reader takes.
_READ: dict[tuple[tuple[str, ...], tuple[str, ...]], LaunchArgs] = {}
_READ_LOCK = threading.Lock()
#: A run reads a handful of distinct launches; the oldest goes beyond this (memory stays bounded).
_READ_MAX = 256


def read_launch(args: Sequence[str], command: Sequence[str] = (), *, source: str = "--sglang-launch") -> LaunchArgs:
    """``args`` (after the command's own flags) as SGLang reads them: parsed on first use, then handed out.

    The option row (typos at configure time), the header, the markers' needs, :class:`LaunchConfig`
    and the fingerprint all read a launch here, so ``--sglang-launch`` is parsed once on its way to
    ``Popen``. A refused launch raises :class:`ConfigError` naming ``source`` (and is not kept).
    """
    key = (command_flags(command), tuple(args))
    with _READ_LOCK:
        found = _READ.get(key)
    if found is None:
        found = parse_launch_args([*key[0], *key[1]], source=source)
        with _READ_LOCK:
            if key not in _READ and len(_READ) >= _READ_MAX:
                del _READ[next(iter(_READ))]
            found = _READ.setdefault(key, found)
    return found


def _literal(text: str) -> str:
    """``text`` used as a fix template that has no ``{name}`` in it."""
    return text.replace("{", "{{").replace("}", "}}")


def _check(owner: str, name: str, value: str, parse: Callable[[str], object], fix: str) -> None:
    try:
        parse(value)
    except ValueError as exc:
        raise LaunchConfigError(owner, name, value, str(exc), fix) from None


@dataclass(frozen=True, repr=False)
class DockerOptions:
    """Docker runner options (turned into SDK keywords by ``server/docker/spec.py``), checked here."""

    image: str | None = None
    gpus: str = defaults.DEFAULT_GPUS
    shm_size: str = defaults.DEFAULT_SHM_SIZE
    ipc_host: bool = defaults.DEFAULT_IPC_HOST
    volumes: tuple[str, ...] = ()
    memory: str | None = None
    pull: str = defaults.DEFAULT_PULL
    network: str | None = None

    def __post_init__(self) -> None:
        """Validate every field; a bad one raises :class:`LaunchConfigError`."""
        wrong = wrong_type(self)
        if wrong is not None:
            raise LaunchConfigError("DockerOptions", wrong.name, wrong.value, wrong.problem,
                                    f"give {{name}} {wrong.expected}")
        object.__setattr__(self, "volumes", tuple(self.volumes))
        owner = "DockerOptions"
        _check(owner, "gpus", self.gpus, docker_options.gpu_device_requests, docker_options.GPUS_FIX)
        _check(owner, "shm_size", self.shm_size, docker_options.parse_size, docker_options.SIZE_FIX)
        if self.memory is not None:
            _check(owner, "memory", self.memory, docker_options.parse_size, docker_options.SIZE_FIX)
        for volume in self.volumes:
            _check(owner, "volumes", volume, docker_options.parse_volume, docker_options.VOLUME_FIX)
        if self.pull not in defaults.PULL_POLICIES:
            raise LaunchConfigError(owner, "pull", self.pull, "not a pull policy",
                                    "give {name} always, missing (default) or never")

    def __repr__(self) -> str:
        """The fields with secrets masked."""
        return redaction.scrub(_fields_repr(self, {}))


def _fields_repr(obj: DockerOptions | LaunchConfig, shown: dict[str, str]) -> str:
    """``Name(field=value, ...)`` like a dataclass repr, with ``shown`` replacing some values."""
    parts = [f"{f.name}={shown.get(f.name, repr(getattr(obj, f.name)))}" for f in fields(obj) if f.repr]
    return f"{type(obj).__name__}({', '.join(parts)})"


#: LaunchConfig fields whose value is never printed in an error (a key; a token in env; --api-key in args).
SECRET_FIELDS = ("args", "command", "env", "api_key")


@dataclass(frozen=True, repr=False)
class LaunchConfig:
    """Everything that defines a launch (identical config -> the same, reusable server).

    ``repr()``/``str()`` never show a secret: the API key, secret-looking environment values and the
    secret launch args (``--api-key`` in any spelling SGLang accepts) are masked.
    """

    runner: str = defaults.DEFAULT_RUNNER
    args: tuple[str, ...] = ()
    command: tuple[str, ...] | None = None
    python: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    startup_timeout_s: float = defaults.DEFAULT_STARTUP_TIMEOUT_S
    api_key: str | None = None
    validate: str = defaults.DEFAULT_VALIDATE
    preflight: bool = True
    host_memory_reserve_gb: float = defaults.DEFAULT_HOST_MEMORY_RESERVE_GB
    log_dir: Path | None = None
    docker: DockerOptions | None = None
    #: Place the server's processes on a Ray cluster instead of this machine (process and simulator runners).
    ray: RayOptions | None = None
    #: The command's flags and the args, read once as SGLang reads them (set from the fields above).
    launch_args: LaunchArgs = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Freeze sequences, validate fields, parse the launch args once and register their secrets."""
        if isinstance(self.env, Mapping):  # env={"HF_HOME": "/models"} reads as it is meant
            object.__setattr__(self, "env", tuple(self.env.items()))
        self._check_types()
        # Accept lists from callers but keep the dataclass hashable and truly frozen.
        object.__setattr__(self, "args", tuple(self.args))
        if self.command is not None:
            object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", tuple((str(k), str(v)) for k, v in self.env))
        if self.log_dir is not None:
            object.__setattr__(self, "log_dir", Path(self.log_dir))
        self._check()
        object.__setattr__(self, "launch_args", self._parse())
        # Registered before anything can print this config (an error, a log line, a failing assert).
        redaction.register(*self.secrets)

    def _check_types(self) -> None:
        """Each field's type, before any is used (a string of args would be a sequence of characters)."""
        wrong = wrong_type(self)
        if wrong is not None:
            fix = ("give {name} a list such as ['--model-path', 'M'] (shlex.split a command line)"
                   if wrong.name in ("args", "command") else f"give {{name}} {wrong.expected}")
            raise LaunchConfigError("LaunchConfig", wrong.name, wrong.shown(SECRET_FIELDS), wrong.problem, fix)

    def _check(self) -> None:
        owner = "LaunchConfig"
        if self.runner not in RUNNERS:
            raise LaunchConfigError(owner, "runner", self.runner,
                                    f"unknown runner; expected one of {', '.join(RUNNERS)}",
                                    "use {name} process (real SGLang) or simulator (no GPU needed)")
        if self.validate not in VALIDATE_MODES:
            raise LaunchConfigError(owner, "validate", self.validate, "expected strict, warn or off",
                                    "use {name} strict (default), warn or off")
        if not 0 < self.startup_timeout_s < math.inf:
            raise LaunchConfigError(owner, "startup_timeout_s", self.startup_timeout_s,
                                    "must be a finite number of seconds > 0",
                                    "give {name} one deadline in seconds for the whole start, e.g. 1800")
        if not 0 <= self.host_memory_reserve_gb < math.inf:
            raise LaunchConfigError(owner, "host_memory_reserve_gb", self.host_memory_reserve_gb,
                                    "must be a finite number >= 0",
                                    "give {name} the host memory to keep free in decimal GB, e.g. 10")
        if self.ray is not None and self.runner == "docker":
            raise LaunchConfigError(owner, "ray", self.ray.ray_address,
                                    "the Ray placement starts server processes on Ray nodes, and the docker runner "
                                    "starts containers here", "use {name} with the process or simulator runner "
                                    "(a Ray node's own image or environment provides SGLang)")
        if self.ray is not None and importlib.util.find_spec("ray") is None:
            raise LaunchConfigError(owner, "ray", self.ray.ray_address, "places servers on Ray, and Ray is not "
                                    "installed here", "pip install 'pytest-sglang[ray]' (Ray >= 2.55.1, as "
                                    "sglang[ray] needs), or drop {name}")
        if self.command is not None and not self.command:
            raise LaunchConfigError(owner, "command", "", "the command is empty",
                                    "give {name} a command prefix, e.g. 'python -m sglang.launch_server'")

    def _parse(self) -> LaunchArgs:
        own = command_flags(self.command or ())
        try:
            return read_launch(self.args, self.command or (), source="LaunchConfig.args")
        except ConfigError as exc:
            # Say which field holds the bad flag: the command's own flags are checked alone.
            bad_command = bool(own) and _rejects(own)
            name = "command" if bad_command else "args"
            shown = " ".join(display_argv(self.command or ())) if bad_command else exc.value
            raise LaunchConfigError("LaunchConfig", name, shown, exc.problem, _literal(exc.fix)) from None

    @property
    def env_dict(self) -> dict[str, str]:
        """The extra environment variables as a dict."""
        return dict(self.env)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret this config holds: the API key, secret-looking env values, secret launch args."""
        env = (value for name, value in self.env if redaction.is_secret_env_name(name))
        return tuple(s for s in (self.api_key, *env, *self.launch_args.secrets) if s)

    @property
    def client_api_key(self) -> str | None:
        """The key clients send: ``api_key``, else the server's own ``--api-key`` (any spelling)."""
        return self.api_key or self.launch_args.api_key

    def args_without(self, *dests: str) -> list[str]:
        """``args`` without the tokens that feed ServerArgs fields ``dests``, in any spelling SGLang accepts.

        The docker runner drops ``host`` and ``port`` this way (``--port=4000``, ``--po 4000`` alike).
        """
        tokens = self.launch_args.tokens
        return [t.text for t in tokens[len(tokens) - len(self.args):] if t.dest not in dests] if self.args else []

    def __repr__(self) -> str:
        """The fields with the launch args shown and secrets masked."""
        shown = {
            "args": repr(tuple(display_launch(self.args, self.command or ()))),
            "command": repr(None if self.command is None else tuple(display_argv(self.command))),
            "env": repr(tuple((k, redaction.MASK if redaction.is_secret_env_name(k) else v) for k, v in self.env)),
            "api_key": repr(None if self.api_key is None else redaction.MASK),
        }
        return redaction.scrub(_fields_repr(self, shown))


def _rejects(argv: Iterable[str]) -> bool:
    try:
        parse_launch_args(list(argv))
    except ConfigError:
        return True
    return False


def given_port(args: LaunchArgs) -> int | None:
    """The ``--port`` of the launch args (any spelling SGLang accepts), if given."""
    if not args.given("port"):
        return None
    if not 0 < args.port < 65536:
        raise ConfigError("--port", args.port, "not a TCP port (1-65535)",
                          "give --port a port number, or leave it out and pytest-sglang picks a free port")
    return args.port


def connect_host(args: LaunchArgs) -> str:
    """The address to reach the server at: its ``--host``, or loopback for a wildcard/absent host."""
    if not args.given("host") or args.host in _WILDCARD_HOSTS:
        return "127.0.0.1"
    return args.host


def command_prefix(config: LaunchConfig) -> list[str]:
    """``config.command`` if given, else ``<python or sys.executable> -m <runner's module>``."""
    if config.command is not None:
        return list(config.command)
    module = DEFAULT_MODULES.get(config.runner, DEFAULT_MODULES["process"])
    return [config.python or sys.executable, "-m", module]


def address_args(args: LaunchArgs, port: int) -> list[str]:
    """What to append so the server listens where we expect: nothing if ``--port`` is given."""
    if given_port(args) is not None:
        return []
    extra = [] if args.given("host") else ["--host", "127.0.0.1"]
    return [*extra, "--port", str(port)]


def effective_argv(config: LaunchConfig, port: int) -> list[str]:
    """The full argv of the server process: command prefix + user args + address flags."""
    return [*command_prefix(config), *config.args, *address_args(config.launch_args, port)]


def pick_port(config: LaunchConfig) -> int:
    """The port the server will listen on: the user's ``--port``, else a free one."""
    port = given_port(config.launch_args)
    return free_port() if port is None else port


def server_url(config: LaunchConfig, port: int) -> str:
    """The base URL a client uses to reach the server listening on ``port``."""
    host = connect_host(config.launch_args)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"
