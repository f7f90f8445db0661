# 318 lines: LaunchArgs and the one parser that builds it; the display helpers (display_*) are the part to split out.
"""SGLang 0.5.23 launch arguments, read once and the way SGLang reads them: :func:`parse_launch_args`.

One argv, one parser: argparse over every option of 0.5.23's own launch parser
(:mod:`pytest_sglang.sglang.flags`), with SGLang's prefix abbreviations (``--tp 8`` is ``--tp-size 8``,
``--api-ke K`` is ``--api-key K``, ``--pp`` is ambiguous). The result, :class:`LaunchArgs`, is the
immutable value every reader uses: the modelled fields (address, parallelism, hicache, keys...) and,
for each argv token, the ServerArgs field it feeds (:class:`ArgToken`). That mapping is how a secret
is masked in every spelling SGLang accepts, and how the docker runner replaces ``--host``/``--port``.

Flags that are not SGLang's are kept in order, not rejected: the simulator's ``--sim-*`` flags and
the flags of a custom ``--sglang-command`` belong to other programs.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.flags import SGLANG_VERSION, flags, human_readable_int
from pytest_sglang.sglang.tokens import (
    SECRET_DESTS,
    ArgToken,
    RecordingParser,
    Rejected,
    add_recorded,
    align,
    mask,
    read_flags,
    rejected,
    run,
)
from pytest_sglang.sglang.typos import Typo, check_flags

__all__ = [
    "SECRET_DESTS",
    "ArgToken",
    "LaunchArgs",
    "add_sglang_arguments",
    "check_launch_flags",
    "command_flags",
    "display_argv",
    "display_launch",
    "display_text",
    "flag_choices",
    "human_readable_int",
    "namespace_to_launch_args",
    "option_strings",
    "parse_launch_args",
    "read_flags",
    "secrets_in",
]

#: Namespace prefix of the flags :class:`LaunchArgs` does not model (shared with the simulator's parser).
PASSTHROUGH_PREFIX = "passthrough__"


@dataclass(frozen=True, repr=False)
class LaunchArgs:
    """The SGLang launch arguments pytest-sglang reasons about (names as SGLang's ServerArgs).

    Defaults are SGLang's CLI defaults (None = "resolved at startup"). The field types follow SGLang's
    own ``type=`` for each flag (``tests/unit`` checks them against the flag table).
    """

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
    hicache_storage_backend_extra_config: str | None = None
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
    #: The other 0.5.23 flags given: (ServerArgs field, value; True for a bare flag), not modelled above.
    given_other: tuple[tuple[str, object], ...] = ()
    #: Tokens that are not 0.5.23 flags at all, nor their values (kept in order).
    unknown: tuple[str, ...] = ()
    #: Every argv token with the field it feeds (empty when built from another program's namespace).
    tokens: tuple[ArgToken, ...] = ()

    @property
    def passthrough(self) -> dict[str, object]:
        """:attr:`given_other` as a mapping (ServerArgs field -> value)."""
        return dict(self.given_other)

    @property
    def argv(self) -> tuple[str, ...]:
        """The argv as given."""
        return tuple(token.text for token in self.tokens)

    def display(self) -> list[str]:
        """The argv as it may be shown anywhere: every secret masked, in every spelling SGLang accepts."""
        return mask(self.tokens)[0]

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret value in the argv (also overridden ones: ``--api-key A --api-key B`` has two)."""
        return tuple(mask(self.tokens)[1])

    def given(self, dest: str) -> bool:
        """Whether the argv sets ServerArgs field ``dest`` (in any spelling)."""
        return any(t.dest == dest and t.role in ("flag", "inline") for t in self.tokens)

    def value(self, dest: str) -> object:
        """ServerArgs field ``dest`` as SGLang will read it (its default when not given; None if unknown)."""
        if dest in _MODELLED_DEFAULTS:
            return cast(object, getattr(self, dest))
        return self.passthrough.get(dest)

    def without(self, *dests: str) -> list[str]:
        """The argv without the tokens that feed ``dests`` (e.g. ``host``, ``port``), in any spelling."""
        return [t.text for t in self.tokens if t.dest not in dests]

    def __repr__(self) -> str:
        shown = [f"{name}={_shown_value(name, value)}" for name, value in self._changed()]
        if self.given_other:
            other = ", ".join(f"{name!r}: {_shown_value(name, value)}" for name, value in self.given_other)
            shown.append(f"given_other={{{other}}}")
        if self.unknown:
            shown.append(f"unknown={tuple(mask([ArgToken(t) for t in self.unknown])[0])!r}")
        return f"LaunchArgs({', '.join(shown)})"

    def _changed(self) -> Iterable[tuple[str, object]]:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _MODELLED_DEFAULTS and value != f.default:
                yield f.name, value


def _shown_value(name: str, value: object) -> str:
    return repr(redaction.MASK) if name in SECRET_DESTS and value is not None else repr(value)


_OWN_FIELDS = frozenset({"given_other", "unknown", "tokens"})
#: Modelled ServerArgs field -> its default (the parser's default for that flag).
_MODELLED_DEFAULTS: dict[str, object] = {
    f.name: f.default for f in dataclasses.fields(LaunchArgs) if f.name not in _OWN_FIELDS
}


def display_argv(argv: Sequence[str]) -> list[str]:
    """Any argv (a launch, a full command line, a ``launch_command``) with its secrets masked.

    Read as SGLang reads it when SGLang would accept it; otherwise masked cautiously
    (:func:`~pytest_sglang.sglang.tokens.mask`).
    """
    try:
        return _parse(tuple(argv)).display()
    except Rejected:
        return mask([ArgToken(text) for text in argv])[0]


def display_launch(args: Sequence[str], command: Sequence[str] = ()) -> list[str]:
    """``args`` as shown, read together with the command's own flags (as SGLang will read them)."""
    if not args:
        return []
    return display_argv([*command_flags(command), *args])[-len(args):]


def display_text(text: str) -> str:
    """A launch or command given as one shell-like string, with its secrets masked."""
    try:
        argv = shlex.split(text)
    except ValueError:  # unbalanced quotes: still mask what looks like a key
        argv = text.split()
    return " ".join(display_argv(argv))


def command_flags(command: Sequence[str]) -> tuple[str, ...]:
    """The part of a command prefix SGLang reads as its own flags.

    ``python -m sglang.launch_server --api-key K`` -> ``--api-key K`` (what follows the module);
    without ``-m`` (``sglang serve --tp 2``), from the first ``--`` token on. A key given only in
    ``--sglang-command`` is then a secret like one in the launch args.
    """
    items = list(command)
    if "-m" in items[:-1]:
        return tuple(items[len(items) - 1 - items[::-1].index("-m") + 2:])
    start = next((i for i, item in enumerate(items) if item.startswith("--")), len(items))
    return tuple(items[start:])


def secrets_in(argv: Sequence[str]) -> tuple[str, ...]:
    """The secret values of any argv (cautiously, when SGLang would reject it)."""
    try:
        return _parse(tuple(argv)).secrets
    except Rejected:
        return tuple(mask([ArgToken(text) for text in argv])[1])


def add_sglang_arguments(parser: argparse.ArgumentParser, *, passthrough: bool = True) -> None:
    """Add SGLang 0.5.23's launch options to ``parser``: modelled ones typed, the rest as pass-through."""
    group = parser.add_argument_group("SGLang launch arguments (0.5.23 names)")
    other = parser.add_argument_group("other SGLang 0.5.23 flags (accepted, not simulated)") if passthrough else None
    for flag in flags():
        if flag.dest in _MODELLED_DEFAULTS:
            add_recorded(group, flag, dest=flag.dest, default=_MODELLED_DEFAULTS[flag.dest], shown=True)
        elif other is not None:
            add_recorded(other, flag, dest=PASSTHROUGH_PREFIX + flag.dest, default=None, shown=False)


@lru_cache(maxsize=1)
def _sglang_parser() -> RecordingParser:
    parser = RecordingParser()
    add_sglang_arguments(parser)
    return parser


@lru_cache(maxsize=256)
def _parse(argv: tuple[str, ...]) -> LaunchArgs:
    values, extras, uses = run(_sglang_parser(), argv)
    # Never seen; if argparse and the map ever disagreed, every token is masked cautiously instead.
    tokens = align(argv, uses, extras) or tuple(ArgToken(text) for text in argv)
    return _from_values(values, extras, tokens)


def _from_values(values: Mapping[str, object], unknown: Sequence[str], tokens: tuple[ArgToken, ...] = ()
                 ) -> LaunchArgs:
    kwargs: dict[str, Any] = {name: values[name] for name in _MODELLED_DEFAULTS if name in values}
    other = tuple((name.removeprefix(PASSTHROUGH_PREFIX), value) for name, value in values.items()
                  if name.startswith(PASSTHROUGH_PREFIX) and value is not None)
    return LaunchArgs(**kwargs, given_other=other, unknown=tuple(unknown), tokens=tokens)


def parse_launch_args(argv: Sequence[str], *, source: str = "--sglang-launch") -> LaunchArgs:
    """Read launch args as SGLang 0.5.23 would, keeping flags that are not SGLang's.

    Raises :class:`~pytest_sglang.errors.ConfigError` naming ``source`` for what SGLang itself
    rejects: a malformed value (``--tp abc``), a value outside the flag's choices, an ambiguous
    abbreviation (``--pp``), a missing value. The message shows the argv with its secrets masked.
    """
    try:
        return _parse(tuple(argv))
    except Rejected as exc:
        raise rejected(exc, argv, source, "SGLang", _SGLANG_FIX) from None


_SGLANG_FIX = ("use SGLang 0.5.23 flag names and values, e.g. --tp-size 8 --pp-size 1 "
               "(python -m sglang.launch_server --help lists them)")


def option_strings(parser: argparse.ArgumentParser) -> frozenset[str]:
    """Every option string of ``parser`` (argparse has no public listing; its actions are stable since 3.2)."""
    return frozenset(option for action in parser._actions for option in action.option_strings)


def check_launch_flags(args: LaunchArgs, *, source: str = "--sglang-launch",
                       also_known: frozenset[str] = frozenset()) -> list[str]:
    """Refuse misspelt flags (``--tp-szie``) before anything starts; return a line for each other unknown flag.

    ``also_known``: flags of the program that takes these args besides SGLang's (the simulator's
    ``--sim-*``). A flag neither knows and not close to a known one is kept and passed on (an SGLang
    newer than the recorded table may have it): the returned lines say so, naming the recorded version.
    """
    known = {option for flag in flags() for option in flag.options} | also_known
    try:
        others = check_flags(args.unknown, known)
    except Typo as exc:
        meant = ", ".join(f"{t.flag} -> {t.close[0]}" for t in exc.typos)
        raise ConfigError(source, " ".join(args.display()), f"{exc} (checked against SGLang {SGLANG_VERSION}'s "
                          "recorded flags, before anything starts)", f"correct the spelling ({meant}); "
                          "python -m sglang.launch_server --help lists the flags") from None
    return [f"{o.flag} is not a flag of SGLang {SGLANG_VERSION} (the recorded table): passed on unchanged, "
            "for a newer SGLang that has it" for o in others]


def namespace_to_launch_args(ns: argparse.Namespace, unknown: Sequence[str] = ()) -> LaunchArgs:
    """Build :class:`LaunchArgs` from a namespace of a parser built with :func:`add_sglang_arguments`."""
    return _from_values(vars(ns), unknown)


def flag_choices(flag: str) -> tuple[str, ...]:
    """The values SGLang 0.5.23 accepts for ``flag`` (e.g. ``--hicache-write-policy``); () if any."""
    for entry in flags():
        if flag in entry.options:
            return entry.choices
    raise KeyError(f"{flag} is not in the SGLang flag table")
