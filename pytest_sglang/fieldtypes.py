"""The type of each field of an engine dataclass, checked against its annotation before any is used.

A wrong type otherwise surfaces far away as a library's words (``'>' not supported between 'str' and
'int'``, ``'list' object has no attribute 'strip'``), or not at all: a string given for ``args`` is a
sequence of its characters, ``ray=3`` was taken. One rule for LaunchConfig, DockerOptions, RayOptions,
FleetSpec and LoadSpec; each raises its own error (the plugin rewords those for its options).

Reads what the annotations say: ``str``, ``int`` (not a bool), ``float`` (an int too, not a bool),
``bool``, ``None`` in a union, ``Path`` (a string too), ``tuple[X, ...]`` and ``tuple[X, Y]`` (a list
too, not a string), and classes (an instance). Ranges stay with each class's own checks.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WrongType:
    """A field whose value does not have its annotated type."""

    name: str
    value: object
    #: What the annotation asks for, in words ("a string or None").
    expected: str

    @property
    def problem(self) -> str:
        return f"expected {self.expected}, got {type(self.value).__name__}"

    def shown(self, secret_fields: Sequence[str] = ()) -> object:
        """The value to print: its type alone for a field that may hold a secret (a key, a token, --api-key)."""
        return f"<{type(self.value).__name__}>" if self.name in secret_fields else self.value


def wrong_type(obj: object, names: Collection[str] | None = None) -> WrongType | None:
    """The first init field of dataclass ``obj`` (of ``names``, default all) not matching its annotation, or None.

    ``names`` leaves out the fields whose own checks already name a wrong type in words of their own.
    """
    hints = _hints(type(obj))
    for field in dataclasses.fields(obj):  # type: ignore[arg-type]  # a dataclass instance, checked by fields()
        if names is not None and field.name not in names:
            continue
        if field.init and field.name in hints and not matches(getattr(obj, field.name), hints[field.name]):
            return WrongType(field.name, getattr(obj, field.name), describe(hints[field.name]))
    return None


#: Per class, read once: evaluating the string annotations was ~90 % of a LoadSpec's construction.
_HINTS: dict[type, dict[str, object]] = {}


def _hints(cls: type) -> dict[str, object]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def matches(value: object, hint: object) -> bool:
    """Whether ``value`` has the type ``hint`` names (see the module docstring for what is read)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is Path:
        return isinstance(value, (str, os.PathLike))
    if origin is tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            return False
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return all(matches(item, args[0]) for item in value)
        return len(value) == len(args) and all(matches(item, arm) for item, arm in zip(value, args, strict=True))
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # an annotation this module does not read (Mapping, Literal...): its class checks it


def describe(hint: object) -> str:
    """``str | None`` -> "a string or None"; ``tuple[str, ...]`` -> "a list of strings (not one string)"."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(arm) for arm in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(args[0])}" + (" (not one string)" if args[0] is str else "")
        return f"a {_pair(args)}"
    return f"a {_NOUNS[hint]}" if hint in _NOUNS else _WORDS.get(hint, f"a {getattr(hint, '__name__', hint)}")


_NOUNS: dict[object, str] = {int: "whole number", float: "number", str: "string", Path: "path"}
_WORDS: dict[object, str] = {type(None): "None", bool: "True or False"}


def _pair(args: tuple[object, ...]) -> str:
    return f"({', '.join(_NOUNS.get(arm, str(arm)) for arm in args)}) {'pair' if len(args) == 2 else 'tuple'}"


def _plural(hint: object) -> str:
    if typing.get_origin(hint) is tuple:
        return _pair(typing.get_args(hint)) + "s"
    return f"{_NOUNS[hint]}s" if hint in _NOUNS else describe(hint)
