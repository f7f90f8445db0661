# Over 300 lines: the option table is one declaration (STYLE: every setting declared once, in one table).
"""The option table: every pytest-sglang setting declared once, as one :class:`Option` row.

A row's name is its CLI flag (``--sglang-x-y``), its ini key and ``dest`` (``sglang_x_y``) and its environment
variable (``PYTEST_SGLANG_X_Y``); it carries the help, the parser (the type), the default (the engine's
constants from :mod:`pytest_sglang.defaults`), the ini type and whether it is secret.
:mod:`pytest_sglang.plugin.settings` resolves the rows into a typed :class:`~pytest_sglang.plugin.settings.Settings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_sglang import defaults
from pytest_sglang.plugin.values import (
    _as_is,
    hide_env_value,
    hide_gateway_secrets,
    hide_launch_secrets,
    hide_url_credentials,
    parse_ab_launches,
    parse_args,
    parse_bool,
    parse_choice,
    parse_docker_memory,
    parse_env_pair,
    parse_fraction,
    parse_gateway,
    parse_gpus,
    parse_launch,
    parse_margin,
    parse_nonnegative_float,
    parse_positive_float,
    parse_positive_int,
    parse_ray_address,
    parse_ray_strategy,
    parse_regression_limits,
    parse_run_label,
    parse_seed,
    parse_shm_size,
    parse_text,
    parse_url,
    parse_volume,
)

__all__ = ["OPTIONS", "OPTIONS_BY_NAME", "SIMULATE_DEFAULT_LAUNCH", "Option"]

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
    Option("sglang_gpus", "GPUs the launch may use: all, none, a count N, or IDs like 0,1 (docker: the "
           "container's; a fleet gives each worker its own block)",
           parse=parse_gpus, default=defaults.DEFAULT_GPUS, metavar="GPUS", number=True, scope="launch"),
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
    # Ray: launched servers and sharded loads on a Ray cluster (the ray extra)
    Option("sglang_ray", "place every launched server process (a fleet's workers and PD roles too) on a Ray "
           "cluster: auto (RAY_ADDRESS, else a local Ray for this run), the head's host:port, or ray://host:10001",
           parse=parse_ray_address, metavar="ADDRESS", show=hide_url_credentials,
           default_text="launch on this machine"),
    Option("sglang_ray_strategy", "Ray placement strategy for the servers: PACK, SPREAD, STRICT_PACK or "
           "STRICT_SPREAD", parse=parse_ray_strategy, default=defaults.DEFAULT_RAY_STRATEGY, metavar="STRATEGY",
           scope="launch"),
    Option("sglang_load_nodes", "spread each load over N Ray nodes (needs --sglang-ray; a marker's load_nodes wins)",
           parse=parse_positive_int, default=1, metavar="N", number=True),
    # fleets: SGLang workers behind SGLang's gateway (smg, sglang-router)
    Option("sglang_workers", "launch N identical SGLang workers and SGLang's gateway in front of them",
           parse=parse_positive_int, metavar="N", number=True, scope="launch", default_text="1, no gateway"),
    Option("sglang_gateway", "gateway arguments (shlex-split), e.g. \"--policy cache_aware\"",
           parse=parse_gateway, metavar="ARGS", show=hide_gateway_secrets, scope="launch"),
    Option("sglang_gateway_command", "the gateway command (shlex-split)", parse=parse_args, metavar="CMD",
           show=hide_launch_secrets, scope="launch",
           default_text="'smg launch' when smg is installed, else 'python -m sglang_router.launch_router'"),
    Option("sglang_min_workers", "healthy workers a gateway must have to be ready", parse=parse_positive_int,
           metavar="N", number=True, default_text="every listed worker"),
    Option("sglang_fleet_direct", "probe a gateway's workers directly: " + ", ".join(defaults.FLEET_DIRECT_MODES)
           + " (auto: workers not reachable from here are judged by what the gateway shows)",
           parse=parse_choice(*defaults.FLEET_DIRECT_MODES), default=defaults.DEFAULT_FLEET_DIRECT, metavar="MODE"),
    # prefill-decode disaggregation: a PD fleet behind the gateway in PD mode
    Option("sglang_prefill", "launch N prefill workers (--disaggregation-mode prefill) for a prefill-decode fleet",
           parse=parse_positive_int, metavar="N", number=True, scope="launch"),
    Option("sglang_decode", "launch M decode workers (--disaggregation-mode decode) for a prefill-decode fleet",
           parse=parse_positive_int, metavar="M", number=True, scope="launch"),
    Option("sglang_prefill_launch", "extra launch args of the prefill workers only (shlex-split)",
           parse=parse_launch, metavar="ARGS", show=hide_launch_secrets, scope="launch"),
    Option("sglang_decode_launch", "extra launch args of the decode workers only (shlex-split)",
           parse=parse_launch, metavar="ARGS", show=hide_launch_secrets, scope="launch"),
    # interleaved A/B (the sglang_ab fixture, python -m pytest_sglang ab): B is A with these changes
    Option("sglang_ab_launch", "configuration B's launch args (shlex-split; default A's): the sglang_ab fixture "
           "launches A and B in turn", parse=parse_launch, metavar="ARGS", show=hide_launch_secrets, scope="launch"),
    Option("sglang_ab_image", "configuration B's docker image (default A's)", metavar="IMAGE", scope="docker"),
    Option("sglang_ab_python", "configuration B's interpreter (another SGLang version's venv; default A's)",
           metavar="PYTHON", scope="launch"),
    Option("sglang_ab_gateway", "configuration B's gateway args in a fleet (shlex-split; default A's)",
           parse=parse_gateway, metavar="ARGS", show=hide_gateway_secrets, scope="launch"),
    Option("sglang_ab_launches", "launches per side of an A/B run (pairs judged on their differences)",
           parse=parse_ab_launches, default=5, metavar="N", number=True),
    Option("sglang_ab_order", "order within each A/B pair: random (seeded, per pair) or alternate (AB, BA, ...)",
           parse=parse_choice("random", "alternate"), default="random", metavar="ORDER"),
    Option("sglang_ab_seed", "seed of the A/B order (and of each simulator launch's speed draw)",
           parse=parse_seed, default=0, metavar="N", number=True),
    Option("sglang_ab_max_regression", "regression of B vs A that fails an A/B run: 5% or "
           "output_throughput:5%,p99_ttft_ms:10%", parse=parse_regression_limits, metavar="LIMITS",
           default_text="5% on output_throughput, median/p99 TTFT and median ITL"),
    Option("sglang_pd_reference_url", "a single SGLang server the PD parity gate compares with", parse=parse_url,
           metavar="URL", show=hide_url_credentials, default_text="launched by the gate from the common launch args"),
    # the acceptance suite (pytest --pyargs pytest_sglang.acceptance)
    Option("sglang_acceptance_samples", "requests per acceptance check", parse=parse_positive_int,
           default=defaults.ACCEPTANCE_SAMPLES, metavar="N", number=True),
    Option("sglang_acceptance_max_tokens", "output tokens per acceptance request", parse=parse_positive_int,
           default=defaults.ACCEPTANCE_MAX_TOKENS, metavar="N", number=True),
    Option("sglang_acceptance_request_timeout", "seconds one acceptance request may take",
           parse=parse_positive_float, default=defaults.ACCEPTANCE_REQUEST_TIMEOUT_S, metavar="S", number=True),
    Option("sglang_acceptance_min_match_rate",
           "floor of identical greedy outputs across batch sizes without --enable-deterministic-inference",
           parse=parse_fraction, default=defaults.ACCEPTANCE_MIN_MATCH_RATE, metavar="F", number=True),
    Option("sglang_acceptance_max_kl", "mean KL estimate allowed between cached and cold logprobs",
           parse=parse_positive_float, default=defaults.ACCEPTANCE_MAX_KL, metavar="X", number=True),
    Option("sglang_acceptance_max_vision_share", "most share of a new image's first-token time the vision encoder "
           "may take", parse=parse_fraction, default=defaults.ACCEPTANCE_MAX_VISION_SHARE, metavar="F", number=True),
    Option("sglang_acceptance_concurrency", "most acceptance requests in flight (capped by the server)",
           parse=parse_positive_int, default=defaults.ACCEPTANCE_CONCURRENCY, metavar="N", number=True),
    Option("sglang_acceptance_disconnect_timeout", "seconds a disconnected stream may hold its slot",
           parse=parse_positive_float, default=defaults.ACCEPTANCE_DISCONNECT_TIMEOUT_S, metavar="S", number=True),
    Option("sglang_acceptance_check_timeout", "seconds one acceptance check may take in all (it stops at its "
           "first stalled request)", parse=parse_positive_float, default=defaults.ACCEPTANCE_CHECK_TIMEOUT_S,
           metavar="S", number=True),
    Option("sglang_acceptance_timeout", "seconds the whole acceptance suite may take (later checks fail at once)",
           parse=parse_positive_float, default=defaults.ACCEPTANCE_SUITE_TIMEOUT_S, metavar="S", number=True),
    # accuracy and golden outputs
    Option("sglang_eval_data", "local dataset file for the gsm8k/mmlu accuracy tasks", metavar="PATH",
           default_text="the Hugging Face hub, when reachable"),
    Option("sglang_golden", "add the 'golden outputs' test: compare the server with this recording",
           metavar="PATH"),
    Option("sglang_golden_min_match", "exact-match rate of token ids the golden check requires",
           parse=parse_fraction, default=1.0, metavar="F", number=True),
    Option("sglang_golden_max_logprob_delta", "largest logprob difference the golden check allows",
           parse=parse_nonnegative_float, metavar="X", number=True, default_text="not checked"),
    # reports
    Option("sglang_report", "write a JSON report (schemas/report.schema.json) to PATH", metavar="PATH"),
    Option("sglang_report_requests", "include per-request records in the JSON report",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_run_label", "name this run in the JSON report (run_label), e.g. a commit or version: "
           "'python -m pytest_sglang trend' names runs by it", parse=parse_run_label, metavar="LABEL",
           default_text="the report's time"),
    Option("sglang_markdown", "write the gate summary as Markdown to PATH", metavar="PATH",
           default_text="$GITHUB_STEP_SUMMARY if set"),
    Option("sglang_baseline", "compare against a previous JSON report, or a directory of reports (one per launch "
           "of the same configuration: judged against a new launch of it)", metavar="PATH"),
    Option("sglang_max_regression",
           "allowed regression vs the baseline: 5% or output_throughput:5%,p99_ttft_ms:10%",
           parse=parse_regression_limits, metavar="LIMITS"),
    Option("sglang_baseline_strict", "fail (not warn) when the baseline ran on another setup or workload",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_html", "write a self-contained HTML report to PATH", metavar="PATH"),
    # consent: what an attached server (not launched by this run) may have done to it
    Option("sglang_allow_disruptive", "allow checks that disturb an attached server (cache flushes, loads above "
           "--sglang-heavy-load); launched servers need no consent",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_heavy_load", "tokens (requests x (input_len + output_len)) above which a load on an attached "
           "server is disruptive", parse=parse_positive_int, default=defaults.HEAVY_LOAD_TOKENS, metavar="TOKENS",
           number=True),
    Option("sglang_strict", "fail (not skip) a check that cannot run without consent (--sglang-allow-disruptive), "
           "or that ran but could not judge (a probe too slow to fail in the load; a baseline comparison whose noise "
           "exceeds the limit: 'cannot judge') or check (weights unread)",
           parse=parse_bool, kind="flag", default=False),
    Option("sglang_profile_on_failure", "when a throughput, SLO or baseline gate fails, profile a short window with "
           "SGLang's profiler (/start_profile, /stop_profile) into DIR and link the trace in every report "
           "(an attached server also needs --sglang-allow-disruptive)", metavar="DIR"),
    Option("sglang_suggest_floors", "run the sglang_throughput markers measure-only and print (and write as JSON) "
           "the floors that would hold, with a margin (--sglang-suggest-floors-margin)", parse=parse_bool,
           kind="flag", default=False),
    Option("sglang_suggest_floors_margin", "the suggested floors' margin below (ceilings' above) the worst end of "
           "what was measured, in percent: 10-20% on dedicated GPUs, more where the machine is shared",
           parse=parse_margin, default=defaults.SUGGESTED_FLOORS_MARGIN, metavar="PCT", number=True,
           default_text="50%"),
)



OPTIONS_BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
