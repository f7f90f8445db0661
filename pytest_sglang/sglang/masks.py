"""Secrets masked as SGLang, smg and sglang-router read them: command lines (abbreviated flags too), payloads.

Above :mod:`pytest_sglang.redaction` (which knows no flags) and beside the flag tables it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar, cast

from pytest_sglang import redaction
from pytest_sglang.sglang.args import display_argv, secrets_in
from pytest_sglang.sglang.gateway_args import display_gateway_argv

__all__ = ["register_launch_args", "scrub_argv", "scrub_payload"]

_T = TypeVar("_T")


def register_launch_args(argv: Iterable[str]) -> None:
    """Register the secrets of SGLang launch args (or a whole command line), read as SGLang reads them."""
    redaction.register(*secrets_in(list(argv)))


def scrub_argv(argv: Iterable[str]) -> list[str]:
    """An argv with its secrets masked in every spelling SGLang, smg or sglang-router accepts (registered or not).

    A command line found on the machine (a leftover server or gateway) may be either program's: each
    token is masked when either reading calls it a secret.
    """
    items = list(argv)
    return [gateway if redaction.MASK in gateway and redaction.MASK not in sglang else sglang
            for sglang, gateway in zip(display_argv(items), display_gateway_argv(items), strict=True)]


def scrub_payload(obj: _T) -> _T:
    """Deep-copy a JSON-like payload with secret keys redacted and secret values masked (same shape).

    Handles SGLang's leaks: secret keys at any depth (top level and ``internal_states``) and
    ``launch_command`` strings that contain ``--api-key VALUE`` (in any spelling SGLang accepts).
    """
    return cast(_T, _scrubbed(obj))


def _scrubbed(obj: object) -> object:
    if isinstance(obj, Mapping):
        out: dict[object, object] = {}
        for key, value in obj.items():
            if key in redaction.SECRET_KEYS and value not in (None, ""):
                out[key] = redaction.REDACTED
            elif key == "launch_command" and isinstance(value, str):
                out[key] = " ".join(scrub_argv(value.split(" ")))
            else:
                out[key] = _scrubbed(value)
        return out
    if isinstance(obj, list):
        return [_scrubbed(v) for v in obj]
    if isinstance(obj, str):
        return redaction.scrub(obj)
    return obj
