"""Every pytest-sglang setting in one table, and how a value is resolved.

Each setting is declared once, as one :class:`~pytest_sglang.plugin.options.Option` row of
:data:`~pytest_sglang.plugin.options.OPTIONS`. :class:`Settings` holds the typed
result; its fields carry no defaults of their own (:func:`resolve` fills them from the rows).
Precedence, from high to low (implemented once, in :func:`resolve`):

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_sglang.errors import ConfigError, LaunchConfigError
from pytest_sglang.plugin.options import OPTIONS, OPTIONS_BY_NAME, SIMULATE_DEFAULT_LAUNCH, Option
from pytest_sglang.plugin.precedence import settle, written
from pytest_sglang.plugin.values import (  # re-exported: callers import the common parsers from here
    parse_args,
    parse_bool,
    parse_choice,
    parse_env_pair,
    parse_launch,
    parse_nonnegative_float,
    parse_positive_float,
    parse_text,
)

if TYPE_CHECKING:  # the URL parser is imported when a URL is given, not at pytest start-up
    from pytest_sglang.server.url import ServerURL

__all__ = [
    "OPTIONS", "OPTIONS_BY_NAME", "SIMULATE_DEFAULT_LAUNCH", "ConfigError", "Option", "Settings", "parse_args",
    "parse_bool", "parse_choice", "parse_env_pair", "parse_launch", "parse_nonnegative_float", "parse_positive_float",
    "parse_text", "resolve",
]



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
    sglang_ray: str | None
    sglang_ray_strategy: str
    sglang_load_nodes: int
    sglang_workers: int | None
    sglang_gateway: tuple[str, ...] | None
    sglang_gateway_command: tuple[str, ...] | None
    sglang_min_workers: int | None
    sglang_fleet_direct: str
    sglang_prefill: int | None
    sglang_decode: int | None
    sglang_prefill_launch: tuple[str, ...] | None
    sglang_decode_launch: tuple[str, ...] | None
    sglang_ab_launch: tuple[str, ...] | None
    sglang_ab_image: str | None
    sglang_ab_python: str | None
    sglang_ab_gateway: tuple[str, ...] | None
    sglang_ab_launches: int
    sglang_ab_order: str
    sglang_ab_seed: int
    sglang_ab_max_regression: str | None
    sglang_pd_reference_url: ServerURL | None
    sglang_acceptance_samples: int
    sglang_acceptance_max_tokens: int
    sglang_acceptance_request_timeout: float
    sglang_acceptance_min_match_rate: float
    sglang_acceptance_max_kl: float
    sglang_acceptance_concurrency: int
    sglang_acceptance_disconnect_timeout: float
    sglang_acceptance_check_timeout: float
    sglang_acceptance_timeout: float
    sglang_eval_data: str | None
    sglang_golden: str | None
    sglang_golden_min_match: float
    sglang_golden_max_logprob_delta: float | None
    sglang_report: str | None
    sglang_report_requests: bool
    sglang_run_label: str | None
    sglang_markdown: str | None
    sglang_baseline: str | None
    sglang_max_regression: str | None
    sglang_baseline_strict: bool
    sglang_html: str | None
    sglang_allow_disruptive: bool
    sglang_heavy_load: int
    sglang_strict: bool
    sglang_suggest_floors: bool
    sglang_suggest_floors_margin: float
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
    def fleet(self) -> bool:
        """True when a fleet is to be launched (regular workers, or prefill and decode workers)."""
        return self.sglang_workers is not None or self.sglang_prefill is not None or self.sglang_decode is not None

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


def _convert(option: Option, raw: Any, source: str) -> Any:
    """Parse one raw value; errors name the option as the user wrote it in that source."""
    where = written(option, source)
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
    except LaunchConfigError as exc:  # an engine field's check: its fix, for this option
        raise _bad_value(option, where, raw, exc.problem, exc.for_option(option.cli).fix) from None
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
