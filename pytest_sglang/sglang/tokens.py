"""Each token of a launch argv and the SGLang field it feeds, read by argparse itself; masking by that map.

SGLang's parser is argparse: it resolves abbreviations (``--api-ke`` is ``--api-key``), splits
``--flag=value`` and decides how many values each option takes. Rather than re-implementing any of
that, every option is registered with a recording action (:class:`_Record`): argparse reports each
use in argv order, and :func:`align` lays those uses over the tokens. The map is checked against
argparse's own leftovers, so it cannot silently drift from what SGLang would read.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, NoReturn

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.flags import Flag, flags, value_parser

__all__ = ["SECRET_DESTS", "ArgToken", "RecordingParser", "Rejected", "TokenRole", "add_recorded",
           "align", "mask", "read_flags", "rejected", "run"]

#: ServerArgs fields whose values are secrets. SGLang serves them back in clear text in
#: ``/server_info`` and its ``server_args=`` log line (reference §2.4), so they are masked here.
SECRET_DESTS = frozenset({"api_key", "admin_api_key", "ssl_keyfile_password", "watermark_config"})
#: What a token is to SGLang: an option (``--api-ke``), its value, both (``--api-key=K``), or not SGLang's.
TokenRole = Literal["flag", "value", "inline", "unknown"]
_ABSENT = object()  # the const of nargs="?" options: tells "given bare" from "given with a value"
_lock = threading.Lock()


@dataclass(frozen=True)
class ArgToken:
    """One argv token and what SGLang 0.5.23 reads it as."""

    text: str
    #: The ServerArgs field the token feeds (as its option or its value); None: not SGLang's.
    dest: str | None = None
    role: TokenRole = "unknown"

    @property
    def value(self) -> str | None:
        """The value this token carries (``K`` of ``--api-key=K`` or of a value token), else None."""
        if self.role == "value":
            return self.text
        return self.text.split("=", 1)[1] if self.role == "inline" else None

    @property
    def secret(self) -> str | None:
        """The secret this token carries (an ``--api-key`` value in any spelling), else None."""
        return self.value if self.dest in SECRET_DESTS else None

    def shown(self) -> str:
        """The token as it may be shown: a secret value masked, registered secrets scrubbed."""
        if self.secret is None:
            return redaction.scrub(self.text)
        return redaction.MASK if self.role == "value" else self.text.split("=", 1)[0] + "=" + redaction.MASK


# ---- masking --------------------------------------------------------------------------------------
@cache
def _secret_options() -> tuple[str, ...]:
    return tuple(option for flag in flags() if flag.dest in SECRET_DESTS for option in flag.options)


def could_name_a_secret(text: str) -> bool:
    """``text`` (before any ``=``) may abbreviate a secret option: used where no parse says more."""
    head = text.split("=", 1)[0].strip()  # " --api-key" (a quoted space) still reads as the flag
    return len(head) > 2 and head.startswith("--") and any(o.startswith(head) for o in _secret_options())


def mask(tokens: Sequence[ArgToken]) -> tuple[list[str], list[str]]:
    """Return (shown argv, secret values).

    Tokens SGLang does not read are masked cautiously: after ``--`` or in an argv SGLang rejects,
    ``--api-k V`` still looks like a key to a reader, so V is hidden.
    """
    shown: list[str] = []
    secrets: list[str] = []
    mask_next = False
    for token in tokens:
        if token.secret is None and len(token.text.split()) > 1:
            # One quoted token of several words (--tp ' --api-key K ') still reads as a key: mask word by word.
            words, hidden = mask([ArgToken(word) for word in token.text.split()])
            secrets += hidden
            shown.append(" ".join(words))
            mask_next = False
            continue
        if token.role != "unknown":
            mask_next = False
            if token.secret is not None:
                secrets.append(token.secret)
            shown.append(token.shown())
            continue
        if mask_next and not token.text.startswith("--"):
            secrets.append(token.text)
            shown.append(redaction.MASK)
            mask_next = False
            continue
        mask_next = could_name_a_secret(token.text)
        if mask_next and "=" in token.text:
            head, value = token.text.split("=", 1)
            secrets.append(value)
            shown.append(f"{head}={redaction.MASK}")
            mask_next = False
            continue
        shown.append(redaction.scrub(token.text))
    return shown, secrets


# ---- the recording parser -----------------------------------------------------------------------------------
class Rejected(Exception):
    """argparse's error message for an argv SGLang would reject."""


@dataclass(frozen=True)
class Use:
    """One use of an option, in argv order: the field it set and how many value tokens followed it."""

    dest: str
    option: str
    count: int


class RecordingParser(argparse.ArgumentParser):
    """argparse as SGLang configures it, except that an error raises and every option use is noted."""

    def __init__(self, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
        super().__init__(prog="sglang.launch_server", add_help=False, parents=list(parents))
        self.uses: list[Use] = []

    def error(self, message: str) -> NoReturn:
        raise Rejected(message)


class _Record(argparse.Action):
    """Stores a value as SGLang's own action would and notes the use (for the token map)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, field: str,
                 negative: frozenset[str] = frozenset(), **kwargs: Any) -> None:
        self.field = field
        self.negative = negative
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        option = option_string or self.option_strings[0]
        value: object
        if self.nargs == 0:
            value, count = option not in self.negative, 0
        elif self.nargs == "?":
            value, count = (True, 0) if values is _ABSENT else (values, 1)
        elif self.nargs in ("*", "+") and isinstance(values, list):
            value, count = tuple(values), len(values)
        else:
            value, count = values, 1
        setattr(namespace, self.dest, value)
        if isinstance(parser, RecordingParser):
            parser.uses.append(Use(self.field, option, count))


def add_recorded(group: argparse._ArgumentGroup, flag: Flag, *, dest: str, default: object, shown: bool) -> None:
    common: dict[str, Any] = {"action": _Record, "field": flag.dest, "dest": dest, "default": default,
                              "help": None if shown else argparse.SUPPRESS}
    if flag.arity in ("0", "bool"):
        negative = frozenset(o for o in flag.options[1:] if o.startswith("--no-")) if flag.arity == "bool" else None
        group.add_argument(*flag.options, nargs=0, negative=negative or frozenset(), **common)
        return
    convert = value_parser(flag)
    group.add_argument(*flag.options, type=convert, choices=[convert(c) for c in flag.choices] or None,
                       nargs=None if flag.arity == "1" else flag.arity,
                       const=_ABSENT if flag.arity == "?" else None, **common)


def run(parser: RecordingParser, argv: Sequence[str]) -> tuple[dict[str, object], list[str], list[Use]]:
    with _lock:  # the parser is shared and notes uses on itself
        parser.uses = []
        ns, extras = parser.parse_known_args(list(argv))
        return vars(ns), extras, parser.uses


def _spells(text: str, option: str) -> bool:
    head = text.split("=", 1)[0]
    return head.startswith("--") and len(head) > 2 and option.startswith(head)


def align(argv: Sequence[str], uses: Sequence[Use], extras: Sequence[str]) -> tuple[ArgToken, ...] | None:
    """Each token with the field it feeds, from argparse's uses in argv order; None if they disagree.

    argparse consumes options left to right, so the next use is spelled by the next token that can
    abbreviate its option (any earlier such token would have been resolved, or rejected as ambiguous).
    """
    tokens: list[ArgToken] = []
    i = 0
    for use in uses:
        while i < len(argv) and not _spells(argv[i], use.option):
            tokens.append(ArgToken(argv[i]))
            i += 1
        if i >= len(argv):
            return None
        if "=" in argv[i]:
            tokens.append(ArgToken(argv[i], use.dest, "inline"))
            i += 1
            continue
        if i + 1 + use.count > len(argv):
            return None
        tokens.append(ArgToken(argv[i], use.dest, "flag"))
        tokens += [ArgToken(text, use.dest, "value") for text in argv[i + 1:i + 1 + use.count]]
        i += 1 + use.count
    tokens += [ArgToken(text) for text in argv[i:]]
    if [t.text for t in tokens if t.role == "unknown"] != list(extras):
        return None
    return tuple(tokens)


def rejected(exc: Rejected, argv: Sequence[str], source: str, program: str, fix: str) -> ConfigError:
    shown, secrets = mask([ArgToken(text) for text in argv])
    problem = str(exc)
    for secret in secrets:  # argparse quotes the token it could not place (e.g. "--a=KEY")
        problem = problem.replace(secret, redaction.MASK)
    return ConfigError(source, " ".join(shown), f"{program} would reject these launch args "
                       f"({redaction.scrub(problem)})", fix)


class _GivenOnly(argparse.Namespace):
    """A namespace that ends up holding only what the argv gives.

    argparse fills in a default only where the namespace lacks the name; here every missing name
    reads as None, so no default is filled in (and ``append`` actions start from None, as usual).
    """

    def __getattr__(self, name: str) -> None:
        if name.startswith("_"):  # argparse's own bookkeeping (``_unrecognized_args``) stays absent
            raise AttributeError(name)
        return None


def read_flags(argv: Sequence[str], parser: argparse.ArgumentParser, *, source: str, program: str,
               fix: str) -> dict[str, object]:
    """Return the flags another program's ``parser`` (the simulator's) reads from ``argv``, by destination.

    Only those given. Flags it does not know are skipped; a value it would reject is a
    :class:`ConfigError` naming ``source``.
    """
    try:
        ns, _ = RecordingParser(parents=[parser]).parse_known_args(list(argv), namespace=_GivenOnly())
    except Rejected as exc:
        raise rejected(exc, argv, source, program, fix) from None
    return dict(vars(ns))
