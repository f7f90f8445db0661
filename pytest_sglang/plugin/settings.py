"""Every pytest-sglang setting in one table, and how a value is resolved.

Each setting is declared once, as one :class:`Option` row of :data:`OPTIONS`: its name (``--sglang-x-y``
<-> ``dest``/ini ``sglang_x_y`` <-> env ``PYTEST_SGLANG_X_Y``), help, parser (its type), default (the
engine's constants from :mod:`pytest_sglang.defaults`), ini type and secret-ness. :class:`Settings`
holds the typed result; its fields carry no defaults of their own (:func:`resolve` fills them from the
rows). Precedence, from high to low (implemented once, in :func:`resolve`):

1. the command line
2. the environment (``PYTEST_SGLANG_*``; ``SGLANG_API_KEY`` is also read for the API key)
3. the ini file (``pytest.ini``, ``tox.ini``, ``setup.cfg``, ``[tool.pytest.ini_options]`` or
   ``[tool.pytest]``)
4. the default

Two settings that contradict each other (``--sglang-simulate`` with ``--sglang-runner docker``, a URL
with a launch) follow the same order: the higher source wins and the report header says so; from the
same level they are a usage error naming both (:mod:`pytest_sglang.plugin.precedence`).

CLI flags default to ``None`` so that "not given" can be told apart from ``false``/``0``.
Adding a setting is one row in :data:`OPTIONS` plus one typed field in :class:`Settings`.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_sglang import defaults
from pytest_sglang.errors import ConfigError
from pytest_sglang.plugin.precedence import settle
from pytest_sglang.plugin.values import (  # the row parsers (re-exported: others import them from here)
    _as_is,
    hide_env_value,
    hide_launch_secrets,
    hide_url_credentials,
    parse_args,
    parse_bool,
    parse_choice,
    parse_docker_memory,
    parse_env_pair,
    parse_gpus,
    parse_launch,
    parse_nonnegative_float,
    parse_positive_float,
    parse_regression_limits,
    parse_shm_size,
    parse_text,
    parse_url,
    parse_volume,
)

if TYPE_CHECKING:  # the URL parser is imported when a URL is given, not at pytest start-up
    from pytest_sglang.server.url import ServerURL

__all__ = [
    "OPTIONS", "OPTIONS_BY_NAME", "ConfigError", "Option", "Settings", "parse_args", "parse_bool", "parse_choice",
    "parse_env_pair", "parse_launch", "parse_nonnegative_float", "parse_positive_float", "parse_text", "resolve",
]

#: pytest's ``addini`` type: a tag (``"linelist"``) or, since pytest 9.2, a type expression
#: (``bool | str``). pytest's own alias for it is private, hence ``Any``.
IniType = Any


@dataclass(frozen=True)
class Option:
    """One setting, declared once: CLI flag, ini key and environment variable share one name."""

    name: str  # dest and ini key, e.g. "sglang_url"
    help: str  # without the default: :attr:`help_text` appends it from ``default``
    parse: Callable[[str], Any] = parse_text
    default: Any = None  # the typed value (a tuple for lists); None = "not set"
    kind: str = "value"  # "value" | "flag" (store_true) | "list" (repeatable / ini linelist) | "negatable"
    metavar: str | None = None
    env_aliases: tuple[str, ...] = ()
    cli_only: bool = False
    #: Never shown: masked in ``Settings`` repr, usage errors and the header; registered for scrubbing.
    secret: bool = False
    #: How a (non-secret) raw value is shown in messages, e.g. :func:`hide_env_value`.
    show: Callable[[str], str] = _as_is
    #: The value may be a bare number in ``[tool.pytest]`` TOML (``sglang_startup_timeout = 900``).
    number: bool = False
    #: What the setting acts on: "run" (always), "launch" (only a launched server), "docker" (only
    #: the docker runner). A setting given where it does not act is named in the report header.
    scope: str = "run"
    #: Said in the help when ``default`` is None but something happens anyway ("the tested release").
    default_text: str | None = None

    @property
    def cli(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "PYTEST_" + self.name.upper()

    @property
    def help_text(self) -> str:
        """The help for the CLI flag and the ini key (one text, STYLE habit 7), with the default."""
        default = self.default_text or _default_text(self.default)
        return f"{self.help} (default {default})" if default else self.help

    @property
    def ini_type(self) -> IniType:
        """The ``addini`` type: numbers and booleans may be bare in ``[tool.pytest]`` TOML, or quoted.

        ``str`` is the last member, so settings (not pytest) reports a bad value, naming the key.
        """
        if self.kind == "list":
            return "linelist"
        if self.kind in ("flag", "negatable"):
            return bool | str
        return str | float if self.number else str

    @property
    def ini_type_fallback(self) -> str:
        """Pytest < 9.2 has no type expressions: strings only (numbers must be quoted in TOML)."""
        return "linelist" if self.kind == "list" else "string"

    def shown(self, raw: object) -> str:
        """``raw`` as it may appear in any output."""
        return "***" if self.secret else self.show(str(raw))


def _default_text(value: object) -> str:
    if value is True:
        return "on"
    if value is None or value is False or value == ():
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


#: What ``--sglang-simulate`` launches when no ``--sglang-launch`` is given: the simulator's
#: smallest profile, which starts in well under a second.
SIMULATE_DEFAULT_LAUNCH: tuple[str, ...] = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny")

# Help-text style: start lowercase, no trailing period, say the unit; the default is appended from
# ``default`` (or ``default_text``), never written in the help.
OPTIONS: tuple[Option, ...] = (
    Option("sglang_url", "attach to a running SGLang server at URL; it is never stopped or signalled",
           parse=parse_url, metavar="URL", show=hide_url_credentials),
    Option("sglang_launch", "launch SGLang with these launch_server args (shlex-split, never a shell)",
           parse=parse_launch, metavar="ARGS", show=hide_launch_secrets, scope="launch"),
    Option("sglang_runner", "how to launch: " + ", ".join(defaults.RUNNERS[:-1]) + " or " + defaults.RUNNERS[-1],
           parse=parse_choice(*defaults.RUNNERS), default=defaults.DEFAULT_RUNNER, metavar="RUNNER",
           scope="launch"),
    Option("sglang_simulate", "shorthand for --sglang-runner simulator (with a working default launch)",
           parse=parse_bool, kind="flag", default=False, scope="launch"),
    Option("sglang_command", "command prefix (shlex-split) replacing '<python> -m sglang.launch_server'",
           parse=parse_args, metavar="CMD", show=hide_launch_secrets, scope="launch"),
    Option("sglang_python", "interpreter for the default command, e.g. a separate SGLang venv",
           metavar="PATH", scope="launch"),
    Option("sglang_env", "extra environment for the server, KEY=VALUE (repeatable)",
           parse=parse_env_pair, kind="list", default=(), metavar="KEY=VALUE", show=hide_env_value,
           scope="launch"),
    Option("sglang_startup_timeout", "one deadline in seconds for the whole start",
           parse=parse_positive_float, default=defaults.DEFAULT_STARTUP_TIMEOUT_S, metavar="S", number=True),
    Option("sglang_request_timeout", "seconds one request of a load may take (marker/LoadSpec request_timeout_s wins)",
           parse=parse_positive_float, metavar="S", number=True,
           default_text="derived from input_len/output_len, at least 60"),
    Option("sglang_load_timeout", "one deadline in seconds for each whole load (load_timeout_s wins)",
           parse=parse_positive_float, metavar="S", number=True, default_text="derived from requests/concurrency"),
    Option("sglang_api_key", "API key sent as a Bearer token (also read from SGLANG_API_KEY)",
           env_aliases=("SGLANG_API_KEY",), metavar="KEY", secret=True),
    Option("sglang_validate", "what schema mismatches do: " + ", ".join(defaults.VALIDATE_MODES),
           parse=parse_choice(*defaults.VALIDATE_MODES), default=defaults.DEFAULT_VALIDATE, metavar="MODE"),
    Option("sglang_host_memory_reserve_gb", "host memory (decimal GB) kept free by the hicache preflight",
           parse=parse_nonnegative_float, default=defaults.DEFAULT_HOST_MEMORY_RESERVE_GB, metavar="N",
           number=True, scope="launch"),
    Option("sglang_no_preflight", "skip the hicache host-memory preflight before launching",
           parse=parse_bool, kind="flag", default=False, scope="launch"),
    Option("sglang_log_dir", "directory for server logs", metavar="DIR", scope="launch",
           default_text="under pytest's basetemp"),
    Option("sglang_kill",
           "stop servers and containers left behind by earlier runs of this plugin, report, exit",
           parse=parse_bool, kind="flag", default=False, cli_only=True),
    # docker runner
    Option("sglang_image", "docker image for the docker runner", metavar="IMAGE", scope="docker",
           default_text="the tested SGLang release"),
    Option("sglang_gpus", "GPUs for the container: all, none, a count N, or IDs like 0,1",
           parse=parse_gpus, default=defaults.DEFAULT_GPUS, metavar="GPUS", number=True,
           scope="docker"),
    Option("sglang_shm_size", "container /dev/shm size, as SGLang's docs recommend",
           parse=parse_shm_size, default=defaults.DEFAULT_SHM_SIZE, metavar="SIZE",
           scope="docker"),
    Option("sglang_ipc_host", "run the container with --ipc=host; --no-sglang-ipc-host turns it off",
           parse=parse_bool, kind="negatable", default=defaults.DEFAULT_IPC_HOST, scope="docker"),
    Option("sglang_volume", "bind mount SRC:DST[:ro] for the container (repeatable)",
           parse=parse_volume, kind="list", default=(), metavar="SRC:DST[:ro]",
           scope="docker"),
    Option("sglang_docker_memory", "container memory limit, e.g. 64g (also the preflight budget)",
           parse=parse_docker_memory, metavar="SIZE", scope="docker"),
    Option("sglang_pull", "image pull policy: " + ", ".join(defaults.PULL_POLICIES),
           parse=parse_choice(*defaults.PULL_POLICIES), default=defaults.DEFAULT_PULL, metavar="POLICY",
           scope="docker"),
    Option("sglang_docker_network", "docker network for the container", metavar="NAME", scope="docker"),
    # reports
    Option("sglang_report", "write a JSON report (schemas/report.schema.json) to PATH", metavar="PATH"),
    Option("sglang_report_requests", "include per-request records in the JSON report",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_markdown", "write the gate summary as Markdown to PATH", metavar="PATH",
           default_text="$GITHUB_STEP_SUMMARY if set"),
    Option("sglang_baseline", "compare against a previous JSON report", metavar="PATH"),
    Option("sglang_max_regression",
           "allowed regression vs the baseline: 5% or output_throughput:5%,p99_ttft_ms:10%",
           parse=parse_regression_limits, metavar="LIMITS"),
    Option("sglang_baseline_strict", "fail (not warn) when the baseline ran on another setup or workload",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_html", "write a self-contained HTML report to PATH", metavar="PATH"),
)



OPTIONS_BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


@dataclass(frozen=True, kw_only=True, repr=False)
class Settings:
    """The resolved configuration of one pytest run (frozen; stored in ``config.stash``).

    Built by :func:`resolve`, which fills every field; the defaults live in the :data:`OPTIONS` rows
    only. Values are the effective ones: when two settings contradict each other the loser is
    dropped and :attr:`notes` says so.
    """

    sglang_url: ServerURL | None
    sglang_launch: tuple[str, ...] | None
    sglang_runner: str
    sglang_simulate: bool
    sglang_command: tuple[str, ...] | None
    sglang_python: str | None
    sglang_env: tuple[str, ...]
    sglang_startup_timeout: float
    sglang_request_timeout: float | None
    sglang_load_timeout: float | None
    sglang_api_key: str | None
    sglang_validate: str
    sglang_host_memory_reserve_gb: float
    sglang_no_preflight: bool
    sglang_log_dir: str | None
    sglang_kill: bool
    sglang_image: str | None
    sglang_gpus: str
    sglang_shm_size: str
    sglang_ipc_host: bool
    sglang_volume: tuple[str, ...]
    sglang_docker_memory: str | None
    sglang_pull: str
    sglang_docker_network: str | None
    sglang_report: str | None
    sglang_report_requests: bool
    sglang_markdown: str | None
    sglang_baseline: str | None
    sglang_max_regression: str | None
    sglang_baseline_strict: bool
    sglang_html: str | None
    #: Where each non-default value came from ("cli", "env PYTEST_SGLANG_URL", "ini").
    sources: Mapping[str, str] = field(default_factory=dict)
    #: For the report header: settings that lost to another one, or that do not act in this run.
    notes: tuple[str, ...] = ()

    @property
    def runner(self) -> str:
        return self.sglang_runner

    @property
    def launch_args(self) -> tuple[str, ...] | None:
        """The launch args to use, or None when nothing is to be launched."""
        if self.sglang_launch is not None:
            return self.sglang_launch
        return SIMULATE_DEFAULT_LAUNCH if self.runner == "simulator" else None

    @property
    def mode(self) -> str | None:
        """``attach``, ``launch``, or None when nothing is configured (conflicts are settled already)."""
        if self.sglang_url is not None:
            return "attach"
        return "launch" if self.launch_args is not None else None

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(pair.split("=", 1) for pair in self.sglang_env)

    def describe_source(self, name: str) -> str:
        return self.sources.get(name, "default")

    def secrets(self) -> tuple[str, ...]:
        """The values of every secret option that is set (to register for scrubbing)."""
        values = (self._value(o) for o in OPTIONS if o.secret)
        return tuple(v for v in values if isinstance(v, str) and v)

    def __repr__(self) -> str:
        # Secret options are masked here, so a failing assertion on the settings shows no key.
        shown = ", ".join(f"{o.name}={_display(o, self._value(o))}" for o in OPTIONS)
        return f"Settings({shown})"

    def _value(self, option: Option) -> object:
        return self.__dict__[option.name]


def _display(option: Option, value: object) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, tuple) and option.kind == "list":
        return repr(tuple(option.shown(v) for v in value))
    if isinstance(value, tuple):  # an argv: shown whole, so a flag's secret value is seen as one
        return repr(option.shown(shlex.join(value)))
    return repr(option.shown(value)) if isinstance(value, str) or option.secret else repr(value)


def _where(option: Option, source: str) -> str:
    """The option as the user wrote it in ``source``."""
    return {"cli": option.cli, "ini": f"ini option {option.name}"}.get(source, source)


def _convert(option: Option, raw: Any, source: str) -> Any:
    """Parse one raw value; errors name the option as the user wrote it in that source."""
    where = _where(option, source)
    if option.kind == "list":
        try:
            items = raw if isinstance(raw, (list, tuple)) else shlex.split(str(raw))
        except ValueError as exc:
            raise _bad_value(option, where, raw, str(exc)) from None
        # each item is parsed on its own so that an error names the bad item, not the whole list
        return tuple(_parse_one(option, where, str(item)) for item in items)
    if option.kind in ("flag", "negatable") and isinstance(raw, bool):
        return raw
    value = _parse_one(option, where, raw)
    return tuple(value) if isinstance(value, list) else value


#: Control characters no setting may hold (tab and line breaks are whitespace in a multi-line ini value).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _parse_one(option: Option, where: str, raw: Any) -> Any:
    bad = _CONTROL.search(str(raw))
    if bad is not None:  # checked for every row, whatever its parser: a NUL is a traceback much later
        raise _bad_value(option, where, raw, f"contains the control character {bad.group()!r}")
    try:
        return option.parse(str(raw))
    except ConfigError as exc:  # an engine parser's own words: keep its problem and fix
        raise _bad_value(option, where, raw, exc.problem, exc.fix) from None
    except ValueError as exc:
        raise _bad_value(option, where, raw, str(exc)) from None


def _bad_value(option: Option, where: str, raw: Any, problem: str, fix: str | None = None) -> ConfigError:
    return ConfigError(where, option.shown(raw), problem,
                       fix or f"give {option.cli} a valid value ({option.help_text})")


def _given(option: Option, cli: Mapping[str, Any], ini: Mapping[str, Any],
           environ: Mapping[str, str]) -> tuple[Any, str] | None:
    """The raw value with the highest precedence and its source, or None (``is not None``, never ``or``)."""
    raw_cli = cli.get(option.name)
    if raw_cli is not None and raw_cli != [] and raw_cli != ():
        return raw_cli, "cli"
    if option.cli_only:
        return None
    env_name = next((n for n in (option.env, *option.env_aliases) if environ.get(n) not in (None, "")), None)
    if env_name is not None:
        return environ[env_name], f"env {env_name}"
    raw_ini = ini.get(option.name)
    if raw_ini is not None and raw_ini != [] and raw_ini != "":
        return raw_ini, "ini"
    return None


def resolve(
    cli: Mapping[str, Any],
    ini: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every option (CLI > env > ini > the row's default), then settle contradictions."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        given = _given(option, cli, ini, environ)
        if given is None:
            values[option.name] = option.default
        else:
            values[option.name], sources[option.name] = _convert(option, *given), given[1]
    notes = settle(values, sources, OPTIONS_BY_NAME)
    return Settings(**values, sources=sources, notes=notes)
