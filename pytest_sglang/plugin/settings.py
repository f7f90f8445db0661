"""Every pytest-sglang setting in one table, and how a value is resolved.

One name per setting in every place: ``--sglang-x-y`` <-> ``dest``/ini ``sglang_x_y`` <->
env ``PYTEST_SGLANG_X_Y``. Precedence, from high to low (implemented once, in :func:`resolve`):

1. the command line
2. the environment (``PYTEST_SGLANG_*``; ``SGLANG_API_KEY`` is also read for the API key)
3. the ini file (``pytest.ini``, ``tox.ini``, ``setup.cfg``, ``[tool.pytest.ini_options]`` or
   ``[tool.pytest]``)
4. the default

CLI flags default to ``None`` so that "not given" can be told apart from ``false``/``0``.
Adding a setting is one row in :data:`OPTIONS` plus one field in :class:`Settings`.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang.errors import ConfigError

__all__ = ["OPTIONS", "ConfigError", "Option", "Settings", "resolve"]


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected one of true/false, 1/0, yes/no, on/off")


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("expected a number, e.g. 900 or 2.5") from None


def parse_positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0:
        raise ValueError("must be a number greater than 0")
    return value


def parse_nonnegative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise ValueError("must be a number >= 0")
    return value


def parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


def parse_str(text: str) -> str:
    return text


def parse_args(text: str) -> list[str]:
    """shlex-split (no shell is ever involved: the result is an argv list)."""
    try:
        return shlex.split(text)
    except ValueError as exc:  # e.g. "No closing quotation"
        raise ValueError(f"cannot be split like a shell command line ({exc})") from None


def parse_env_pair(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key or not key.replace("_", "").isalnum():
        raise ValueError("expected KEY=VALUE")
    return text


@dataclass(frozen=True)
class Option:
    """One setting: CLI flag, ini key and environment variable share one name."""

    name: str  # dest and ini key, e.g. "sglang_url"
    help: str
    parse: Callable[[str], Any] = parse_str
    default: Any = None
    kind: str = "value"  # "value" | "flag" (store_true) | "list" (repeatable / ini linelist) | "negatable"
    metavar: str | None = None
    env_aliases: tuple[str, ...] = ()
    cli_only: bool = False
    secret: bool = False
    #: The value may be a bare number in ``[tool.pytest]`` TOML (``sglang_startup_timeout = 900``).
    number: bool = False

    @property
    def cli(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "PYTEST_" + self.name.upper()

    @property
    def ini_type(self) -> str:
        return {"flag": "bool", "negatable": "bool", "list": "linelist"}.get(self.kind, "string")


_RUNNERS = ("process", "simulator", "docker")

#: What ``--sglang-simulate`` launches when no ``--sglang-launch`` is given: the simulator's
#: smallest profile, which starts in well under a second.
SIMULATE_DEFAULT_LAUNCH: tuple[str, ...] = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny")

# Help-text style: start lowercase, no trailing period, say the unit, name the default.
OPTIONS: tuple[Option, ...] = (
    Option("sglang_url", "attach to a running SGLang server at URL; it is never stopped or signalled",
           metavar="URL"),
    Option("sglang_launch", "launch SGLang with these launch_server args (shlex-split, never a shell)",
           parse=parse_args, metavar="ARGS"),
    Option("sglang_runner", "how to launch: process, simulator or docker (default process)",
           parse=parse_choice(*_RUNNERS), metavar="RUNNER"),
    Option("sglang_simulate", "shorthand for --sglang-runner simulator (with a working default launch)",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_command", "command prefix (shlex-split) replacing '<python> -m sglang.launch_server'",
           parse=parse_args, metavar="CMD"),
    Option("sglang_python", "interpreter for the default command, e.g. a separate SGLang venv",
           metavar="PATH"),
    Option("sglang_env", "extra environment for the server, KEY=VALUE (repeatable)",
           parse=parse_env_pair, kind="list", default=(), metavar="KEY=VALUE"),
    Option("sglang_startup_timeout", "one deadline in seconds for the whole start (default 1800)",
           parse=parse_positive_float, default=1800.0, metavar="S", number=True),
    Option("sglang_api_key", "API key sent as a Bearer token (also read from SGLANG_API_KEY)",
           env_aliases=("SGLANG_API_KEY",), metavar="KEY", secret=True),
    Option("sglang_validate", "what schema mismatches do: strict, warn or off (default strict)",
           parse=parse_choice("strict", "warn", "off"), default="strict", metavar="MODE"),
    Option("sglang_host_memory_reserve_gb",
           "host memory (decimal GB) kept free by the hicache preflight (default 10)",
           parse=parse_nonnegative_float, default=10.0, metavar="N", number=True),
    Option("sglang_no_preflight", "skip the hicache host-memory preflight before launching",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_log_dir", "directory for server logs (default under pytest's basetemp)", metavar="DIR"),
    Option("sglang_kill",
           "stop servers and containers left behind by earlier runs of this plugin, report, exit",
           parse=parse_bool, kind="flag", default=False, cli_only=True),
    # docker runner
    Option("sglang_image", "docker image for the docker runner (default: the tested SGLang release)",
           metavar="IMAGE"),
    Option("sglang_gpus", "GPUs for the container: all, none, a count N, or IDs like 0,1 (default all)",
           default="all", metavar="GPUS", number=True),
    Option("sglang_shm_size", "container /dev/shm size (default 32g, as SGLang's docs recommend)",
           default="32g", metavar="SIZE"),
    Option("sglang_ipc_host",
           "run the container with --ipc=host (default on; --no-sglang-ipc-host turns it off)",
           parse=parse_bool, kind="negatable", default=True),
    Option("sglang_volume", "bind mount SRC:DST[:ro] for the container (repeatable)",
           kind="list", default=(), metavar="SRC:DST[:ro]"),
    Option("sglang_docker_memory", "container memory limit, e.g. 64g (also the preflight budget)",
           metavar="SIZE"),
    Option("sglang_pull", "image pull policy: always, missing or never (default missing)",
           parse=parse_choice("always", "missing", "never"), default="missing", metavar="POLICY"),
    Option("sglang_docker_network", "docker network for the container", metavar="NAME"),
    # reports
    Option("sglang_report", "write a JSON report (schemas/report.schema.json) to PATH", metavar="PATH"),
    Option("sglang_report_requests", "include per-request records in the JSON report",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_markdown",
           "write the gate summary as Markdown to PATH (default $GITHUB_STEP_SUMMARY if set)",
           metavar="PATH"),
    Option("sglang_baseline", "compare against a previous JSON report", metavar="PATH"),
    Option("sglang_max_regression",
           "allowed regression vs the baseline: 5% or output_throughput:5%,p99_ttft_ms:10%",
           metavar="LIMITS"),
    Option("sglang_baseline_strict", "fail (not warn) when the baseline's fingerprint differs",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_html", "write a self-contained HTML report to PATH", metavar="PATH"),
)



@dataclass(frozen=True)
class Settings:
    """The resolved configuration of one pytest run (frozen; stored in ``config.stash``)."""

    sglang_url: str | None = None
    sglang_launch: tuple[str, ...] | None = None
    sglang_runner: str | None = None
    sglang_simulate: bool = False
    sglang_command: tuple[str, ...] | None = None
    sglang_python: str | None = None
    sglang_env: tuple[str, ...] = ()
    sglang_startup_timeout: float = 1800.0
    sglang_api_key: str | None = None
    sglang_validate: str = "strict"
    sglang_host_memory_reserve_gb: float = 10.0
    sglang_no_preflight: bool = False
    sglang_log_dir: str | None = None
    sglang_kill: bool = False
    sglang_image: str | None = None
    sglang_gpus: str = "all"
    sglang_shm_size: str = "32g"
    sglang_ipc_host: bool = True
    sglang_volume: tuple[str, ...] = ()
    sglang_docker_memory: str | None = None
    sglang_pull: str = "missing"
    sglang_docker_network: str | None = None
    sglang_report: str | None = None
    sglang_report_requests: bool = False
    sglang_markdown: str | None = None
    sglang_baseline: str | None = None
    sglang_max_regression: str | None = None
    sglang_baseline_strict: bool = False
    sglang_html: str | None = None
    #: Where each non-default value came from ("cli", "env PYTEST_SGLANG_URL", "ini", "default").
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def runner(self) -> str:
        if self.sglang_runner is not None:
            return self.sglang_runner
        return "simulator" if self.sglang_simulate else "process"

    @property
    def launch_args(self) -> tuple[str, ...] | None:
        """The launch args to use, or None when nothing is to be launched."""
        if self.sglang_launch is not None:
            return self.sglang_launch
        return SIMULATE_DEFAULT_LAUNCH if self.runner == "simulator" else None

    @property
    def mode(self) -> str | None:
        """``attach`` (a URL wins over a launch), ``launch``, or None when nothing is configured."""
        if self.sglang_url is not None:
            return "attach"
        return "launch" if self.launch_args is not None else None

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(pair.split("=", 1) for pair in self.sglang_env)

    def describe_source(self, name: str) -> str:
        return self.sources.get(name, "default")


def _convert(option: Option, raw: Any, source: str) -> Any:
    """Parse one raw value; errors name the option as the user wrote it in that source."""
    where = {"cli": option.cli, "ini": f"ini option {option.name}"}.get(source, source)
    if option.kind == "list":
        try:
            items = raw if isinstance(raw, (list, tuple)) else shlex.split(str(raw))
        except ValueError as exc:
            raise _bad_value(option, where, raw, exc) from None
        # each item is parsed on its own so that an error names the bad item, not the whole list
        return tuple(_parse_one(option, where, str(item)) for item in items)
    if option.kind in ("flag", "negatable") and isinstance(raw, bool):
        return raw
    value = _parse_one(option, where, raw)
    return tuple(value) if isinstance(value, list) else value


def _parse_one(option: Option, where: str, raw: Any) -> Any:
    try:
        return option.parse(str(raw))
    except ValueError as exc:
        raise _bad_value(option, where, raw, exc) from None


def _bad_value(option: Option, where: str, raw: Any, exc: ValueError) -> ConfigError:
    return ConfigError(where, raw, str(exc), f"give {option.cli} a valid value ({option.help})")


def resolve(
    cli: Mapping[str, Any],
    ini: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every option: CLI > env > ini > default (``is not None``, never ``or``)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        raw_cli = cli.get(option.name)
        if raw_cli is not None and raw_cli != [] and raw_cli != ():
            values[option.name], sources[option.name] = _convert(option, raw_cli, "cli"), "cli"
            continue
        names = (option.env, *option.env_aliases)
        env_name = next((n for n in names if environ.get(n) not in (None, "")), None)
        if env_name is not None and not option.cli_only:
            values[option.name] = _convert(option, environ[env_name], f"env {env_name}")
            sources[option.name] = f"env {env_name}"
            continue
        raw_ini = None if option.cli_only else ini.get(option.name)
        if raw_ini is not None and raw_ini != [] and raw_ini != "":
            values[option.name], sources[option.name] = _convert(option, raw_ini, "ini"), "ini"
    return Settings(**values, sources=sources)

