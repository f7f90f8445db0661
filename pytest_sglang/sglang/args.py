"""SGLang 0.5.23 launch arguments: one table shared by the simulator, the preflight and the planner.

The simulator parses a production launch command exactly where ``python -m sglang.launch_server``
would (same names, aliases and argparse prefix abbreviation, so ``--tp 8`` works and ``--pp`` is
ambiguous, as in 0.5.23). The plugin's preflight and ``python -m pytest_sglang plan`` read the same
table tolerantly. Every other ServerArgs field of 0.5.23 is registered as a pass-through flag so that
abbreviation behaves as in SGLang (``--disable-cuda-graph`` must not be read as a prefix of
``--disable-cuda-graph-padding``); flags outside that list are accepted with a warning.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pytest_sglang.errors import ConfigError

_SUFFIX = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]i?)?\s*$")
_MULT = {"k": 10**3, "ki": 2**10, "m": 10**6, "mi": 2**20, "g": 10**9, "gi": 2**30}


def token_count(text: str) -> int:
    """Parse SGLang's token-count values: ``4096``, ``64k``, ``1Mi``."""
    m = _SUFFIX.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"invalid token count: {text!r} (examples: 4096, 64k, 1Mi)")
    value = float(m.group(1)) * _MULT.get((m.group(2) or "").lower(), 1)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"invalid token count: {text!r} (not a whole number)")
    return int(value)


def _bool_env(parser: argparse.ArgumentParser, *names: str, help: str) -> None:
    parser.add_argument(*names, action="store_true", default=False, help=help)


# (flags, kwargs) for every flag the simulator and the planner understand. Defaults are SGLang's CLI
# defaults (None = "resolved at startup"). Keep in the order of reference §10.
_KNOWN: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--model-path", "--model"), {"type": str, "default": None, "help": "model path or HF repo id"}),
    (("--served-model-name",), {"type": str, "default": None}),
    (("--tokenizer-path",), {"type": str, "default": None}),
    (("--host",), {"type": str, "default": "127.0.0.1"}),
    (("--port",), {"type": int, "default": 30000}),
    (("--tp-size", "--tensor-parallel-size"), {"type": int, "default": 1, "dest": "tp_size"}),
    (("--dp-size", "--data-parallel-size"), {"type": int, "default": 1, "dest": "dp_size"}),
    (("--pp-size", "--pipeline-parallel-size"), {"type": int, "default": 1, "dest": "pp_size"}),
    (("--nnodes",), {"type": int, "default": 1}),
    (("--mem-fraction-static",), {"type": float, "default": None}),
    (("--max-total-tokens",), {"type": token_count, "default": None}),
    (("--max-running-requests",), {"type": int, "default": None}),
    (("--max-queued-requests",), {"type": int, "default": None}),
    (("--context-length",), {"type": token_count, "default": None}),
    (("--chunked-prefill-size",), {"type": int, "default": None}),
    (("--max-prefill-tokens",), {"type": int, "default": 16384}),
    (("--page-size",), {"type": int, "default": None}),
    (("--enable-hierarchical-cache", "--enable-hicache"), {"action": "store_true", "default": False,
                                                            "dest": "enable_hierarchical_cache"}),
    (("--hicache-ratio",), {"type": float, "default": None}),
    (("--hicache-size",), {"type": int, "default": 0}),
    (("--hicache-host-memory-fraction",), {"type": float, "default": 0.8}),
    (("--hicache-host-memory-mode",), {"type": str, "default": "cache", "choices": ["cache", "buffer_only"]}),
    (("--hicache-write-policy",), {"type": str, "default": "write_through",
                                   "choices": ["write_back", "write_through", "write_through_selective"]}),
    (("--hicache-io-backend",), {"type": str, "default": "kernel", "choices": ["direct", "kernel", "kernel_ascend"]}),
    (("--hicache-mem-layout",), {"type": str, "default": "page_first",
                                 "choices": ["layer_first", "page_first", "page_first_direct",
                                             "page_first_kv_split", "page_head"]}),
    (("--hicache-storage-backend",), {"type": str, "default": None}),
    (("--hicache-storage-prefetch-policy",), {"type": str, "default": "timeout",
                                              "choices": ["best_effort", "wait_complete", "timeout"]}),
    (("--api-key",), {"type": str, "default": None}),
    (("--admin-api-key",), {"type": str, "default": None}),
    (("--enable-metrics",), {"action": "store_true", "default": False}),
    (("--enable-cache-report",), {"action": "store_true", "default": False}),
    (("--log-level",), {"type": str, "default": "info"}),
    (("--skip-server-warmup",), {"action": "store_true", "default": False}),
    (("--random-seed",), {"type": int, "default": None}),
    (("--load-format",), {"type": str, "default": "auto"}),
    (("--stream-interval",), {"type": int, "default": 1}),
    (("--incremental-streaming-output",), {"action": "store_true", "default": False}),
    (("--stream-response-default-include-usage",), {"action": "store_true", "default": False}),
    (("--allow-auto-truncate",), {"action": "store_true", "default": False}),
    (("--disable-radix-cache",), {"action": "store_true", "default": False}),
    (("--kv-cache-dtype",), {"type": str, "default": "auto"}),
    (("--device",), {"type": str, "default": None}),
]


def _passthrough_fields() -> list[str]:
    text = resources.files("pytest_sglang").joinpath("data/sglang_0_5_23_server_args.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def add_sglang_arguments(parser: argparse.ArgumentParser, *, passthrough: bool = True) -> None:
    """Add SGLang's launch flags to ``parser`` (modelled ones typed, the rest as pass-through)."""
    group = parser.add_argument_group("SGLang launch arguments (0.5.23 names)")
    taken: set[str] = set()
    for flags, kwargs in _KNOWN:
        group.add_argument(*flags, **kwargs)
        taken.update(flags)
    if not passthrough:
        return
    other = parser.add_argument_group("other SGLang 0.5.23 flags (accepted, not simulated)")
    for name in _passthrough_fields():
        flag = "--" + name.replace("_", "-")
        if flag in taken:
            continue
        taken.add(flag)
        # nargs="?" accepts both boolean flags and flags with one value.
        other.add_argument(flag, nargs="?", const=True, default=None, dest=f"passthrough__{name}",
                           help=argparse.SUPPRESS)


@dataclass(frozen=True)
class LaunchArgs:
    """The SGLang launch arguments pytest-sglang reasons about (names as SGLang's ServerArgs)."""

    model_path: str | None = None
    served_model_name: str | None = None
    tokenizer_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 1
    dp_size: int = 1
    pp_size: int = 1
    nnodes: int = 1
    mem_fraction_static: float | None = None
    max_total_tokens: int | None = None
    max_running_requests: int | None = None
    max_queued_requests: int | None = None
    context_length: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = 16384
    page_size: int | None = None
    enable_hierarchical_cache: bool = False
    hicache_ratio: float | None = None
    hicache_size: int = 0
    hicache_host_memory_fraction: float = 0.8
    hicache_host_memory_mode: str = "cache"
    hicache_write_policy: str = "write_through"
    hicache_io_backend: str = "kernel"
    hicache_mem_layout: str = "page_first"
    hicache_storage_backend: str | None = None
    hicache_storage_prefetch_policy: str = "timeout"
    api_key: str | None = None
    admin_api_key: str | None = None
    enable_metrics: bool = False
    enable_cache_report: bool = False
    log_level: str = "info"
    skip_server_warmup: bool = False
    random_seed: int | None = None
    load_format: str = "auto"
    stream_interval: int = 1
    incremental_streaming_output: bool = False
    stream_response_default_include_usage: bool = False
    allow_auto_truncate: bool = False
    disable_radix_cache: bool = False
    kv_cache_dtype: str = "auto"
    device: str | None = None
    #: Other 0.5.23 flags given (name -> value; True for a bare flag), not simulated.
    passthrough: dict[str, Any] = field(default_factory=dict)
    #: Tokens that are not 0.5.23 flags at all (kept in order).
    unknown: tuple[str, ...] = ()

    def given_flags(self) -> list[str]:
        """The SGLang flag names of pass-through and unknown options, for warnings."""
        names = ["--" + k.replace("_", "-") for k in self.passthrough]
        names += [t for t in self.unknown if t.startswith("--")]
        return names


def _from_namespace(ns: argparse.Namespace, unknown: Sequence[str]) -> LaunchArgs:
    values = vars(ns)
    names = {f.name for f in dataclasses.fields(LaunchArgs)} - {"passthrough", "unknown"}
    kwargs: dict[str, Any] = {k: values[k] for k in names if k in values}
    passthrough = {k.removeprefix("passthrough__"): v for k, v in values.items()
                   if k.startswith("passthrough__") and v is not None}
    return LaunchArgs(**kwargs, passthrough=passthrough, unknown=tuple(unknown))


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # type: ignore[override]
        raise argparse.ArgumentError(None, message)


def parse_launch_args(argv: Sequence[str], *, source: str = "--sglang-launch") -> LaunchArgs:
    """Read SGLang launch args tolerantly (unknown flags are kept, not rejected).

    Raises :class:`ConfigError` naming ``source`` when a modelled flag has a malformed value
    (``--tp abc``) or a flag is ambiguous (``--pp``), the same inputs SGLang itself rejects.
    """
    parser = _RaisingParser(prog="sglang.launch_server", add_help=False)
    add_sglang_arguments(parser)
    try:
        ns, unknown = parser.parse_known_args(list(argv))
    except argparse.ArgumentError as exc:
        raise ConfigError(source, " ".join(argv), f"SGLang would reject these launch args ({exc})",
                          "use SGLang 0.5.23 flag names, e.g. --tp-size 8 --pp-size 1") from None
    return _from_namespace(ns, unknown)


def namespace_to_launch_args(ns: argparse.Namespace, unknown: Sequence[str] = ()) -> LaunchArgs:
    """Build :class:`LaunchArgs` from a namespace of a parser built with :func:`add_sglang_arguments`."""
    return _from_namespace(ns, unknown)


def find_flag(argv: Sequence[str], *names: str) -> str | None:
    """Return the value of the first of ``names`` in ``argv`` (``--x v`` or ``--x=v``), else None."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None
