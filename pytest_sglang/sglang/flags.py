"""Every launch flag of SGLang 0.5.23, as its own parser declares them (names, arity, types, choices).

``data/sglang_0_5_23_flags.txt`` lists each option of ``sglang serve`` (= ``python -m
sglang.launch_server``) with its aliases, destination, number of values, value type and choices,
read from the 0.5.23 wheel's ``ServerArgs.add_cli_args``. A parser with these options
(:func:`pytest_sglang.sglang.args.add_sglang_arguments`) accepts and rejects what 0.5.23 does: unknown
flags, a missing value, ``--tp abc``, ``--attention-backend bogus``, and the same abbreviations.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Literal, cast

Arity = Literal["0", "1", "?", "+", "*", "bool"]
_ARITIES = ("0", "1", "?", "+", "*", "bool")
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


@dataclass(frozen=True)
class Flag:
    """One option of SGLang's launch parser."""

    options: tuple[str, ...]
    dest: str
    arity: Arity
    value_type: str  # int | float | human_readable_int | json | str | "-" (no value)
    choices: tuple[str, ...] = ()


def human_readable_int(text: str) -> int:
    """SGLang's token counts: ``4096``, ``25.6k`` (SI, decimals allowed), ``1Mi`` (IEC, whole numbers).

    Named as in SGLang so that argparse's message reads the same: ``invalid human_readable_int value``.
    """
    value = text.strip()
    match = _NUMBER.fullmatch(value)
    if match is None:
        return int(value)
    number, suffix = match.groups()
    if suffix in _IEC:
        if "." in number:
            raise argparse.ArgumentTypeError(f"Decimals are not allowed with IEC suffixes like '{suffix}'")
        return int(number) * _IEC[suffix]
    return int(Decimal(number) * _SI[suffix])


def loads(text: str) -> object:
    """JSON-valued flags (``--json-model-override-args``); SGLang uses ``json.loads`` itself."""
    return cast(object, json.loads(text))


_TYPES: dict[str, Callable[[str], object]] = {
    "int": int,
    "float": float,
    "human_readable_int": human_readable_int,
    "json": loads,
    "str": str,
}


def value_parser(flag: Flag) -> Callable[[str], object]:
    """The ``type=`` SGLang gives ``flag``'s values (``str`` for flags without a value)."""
    return _TYPES.get(flag.value_type, str)


def _flag(line: str) -> Flag:
    options, dest, arity, value_type, *rest = line.split("\t")
    if arity not in _ARITIES or value_type not in (*_TYPES, "-"):
        raise ValueError(f"malformed flag table line: {line!r}")
    choices = tuple(rest[0].split(",")) if rest and rest[0] else ()
    return Flag(tuple(options.split()), dest, cast(Arity, arity), value_type, choices)


#: The SGLang release whose launch flags are recorded (``data/sglang_0_5_23_flags.txt``).
SGLANG_VERSION = "0.5.23"


@cache
def load_table(name: str) -> tuple[Flag, ...]:
    """A recorded flag table shipped in ``pytest_sglang/data`` (SGLang's, or a gateway's), in declaration order."""
    text = resources.files("pytest_sglang").joinpath(f"data/{name}").read_text("utf-8")
    return tuple(_flag(line) for line in text.splitlines() if line.strip() and not line.startswith("#"))


def flags() -> tuple[Flag, ...]:
    """SGLang's table, in SGLang's declaration order."""
    return load_table("sglang_0_5_23_flags.txt")
