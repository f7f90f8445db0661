"""What every command shares with the plugin: the API key's sources, the URL check, the auth probe, value checks.

The commands read the environment the plugin reads (``--api-key``, else ``PYTEST_SGLANG_API_KEY``,
else ``SGLANG_API_KEY``: the plugin's option row, not a copy), check URLs with the plugin's parser,
and check values against the marker's own declaration (:func:`keyword_type`), so ``eval
--num-examples`` and ``sglang_accuracy(num_examples=...)`` have one limit. Errors have one shape:
``--flag=value: problem. Fix: ...`` (argparse prefixes the command), exit code 2.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx

from pytest_sglang.errors import ConfigError
from pytest_sglang.files import check_writable
from pytest_sglang.gates import keywords
from pytest_sglang.plugin.options import OPTIONS_BY_NAME
from pytest_sglang.redaction import MASK, register, scrub
from pytest_sglang.server.client import make_client
from pytest_sglang.server.url import ServerURL, parse_server_url

#: Seconds the authentication probe may take (it is one small GET).
AUTH_PROBE_S = 15.0

#: Each command flag that is a plugin setting under a shorter name, and that setting's row: the one
#: mapping between the commands' words and the plugin's, read both ways (:func:`add_server_flags`,
#: :func:`api_key`, :func:`setting_default`, :func:`in_flag_words`).
SETTING_OF_FLAG = {
    "--url": "sglang_url",
    "--api-key": "sglang_api_key",
    "--max-regression": "sglang_max_regression",
    "--min-match": "sglang_golden_min_match",
    "--max-logprob-delta": "sglang_golden_max_logprob_delta",
}


@dataclass(frozen=True)
class ApiKey:
    """The key a command sends, and where it came from (for the message when the server refuses it)."""

    value: str | None
    source: str  # "--api-key", "env SGLANG_API_KEY", or "" when there is none

    @property
    def shown(self) -> str:
        return MASK if self.value else "(not set)"


def api_key(flag_value: str | None, environ: dict[str, str] | None = None) -> ApiKey:
    """``--api-key``, else the plugin's environment variables for ``--sglang-api-key``, in its order."""
    env = os.environ if environ is None else environ
    option = OPTIONS_BY_NAME[SETTING_OF_FLAG["--api-key"]]
    found = ApiKey(flag_value, "--api-key") if flag_value else next(
        (ApiKey(env[name], f"env {name}") for name in (option.env, *option.env_aliases) if env.get(name)),
        ApiKey(None, ""))
    register(found.value)  # masked in everything printed from here on
    return found


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--api-key``: the server a command talks to, as ``--sglang-url`` and ``--sglang-api-key``."""
    option = OPTIONS_BY_NAME[SETTING_OF_FLAG["--api-key"]]
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument("--api-key", default=None, metavar=option.metavar,
                        help=f"sent as 'Authorization: Bearer {option.metavar}' (default: env "
                             f"{' or '.join((option.env, *option.env_aliases))})")


def setting_default(flag: str) -> object:
    """The default of the plugin setting behind ``flag``: a command and the plugin start from one value."""
    return OPTIONS_BY_NAME[SETTING_OF_FLAG[flag]].default


def in_flag_words(text: str) -> str:
    """A message of the plugin's parsers (``--sglang-max-regression=...``) in the command's flags."""
    for flag, setting in SETTING_OF_FLAG.items():
        text = text.replace(OPTIONS_BY_NAME[setting].cli, flag)
    return text


def server_url(text: str) -> ServerURL:
    """``--url`` checked as the plugin checks ``--sglang-url`` (a missing scheme is a usage error)."""
    return parse_server_url(text, source="--url")


def check_auth(url: ServerURL, key: ApiKey) -> None:
    """Raise :class:`ConfigError` naming the key's source when the server refuses it (401/403).

    ``GET /v1/models`` needs the key when the server has one (SGLang's NORMAL auth, as do /generate
    and /server_info); anything but 401/403 is left to the command, which reports it its own way.
    """
    try:
        with make_client(url, key.value, timeout=AUTH_PROBE_S) as client:
            response = client.get("/v1/models")
    except httpx.HTTPError:
        return
    if response.status_code not in (401, 403):
        return
    refused = f"refused the key from {key.source}" if key.value else "needs an API key and none was given"
    raise ConfigError(key.source or "--api-key", key.shown,
                      f"GET /v1/models at {url.display} answered {response.status_code}: the server {refused}",
                      "pass the server's --api-key as --api-key KEY or in env SGLANG_API_KEY "
                      "(or PYTEST_SGLANG_API_KEY), as for the plugin")


def keyword_type(gate: Callable[..., Any], name: str, flag: str) -> Callable[[str], object]:
    """An argparse ``type=`` that checks a flag against the marker keyword ``name`` of ``gate``.

    The keyword's declaration (type, range, choices) is the only one: ``--min-score 90`` is refused
    as ``min_score=90`` is, with the same requirement and suggestion, in the flag's words.
    """
    keyword = keywords.declared(gate).keywords[name]

    def parse(text: str) -> object:
        value = _number(text)
        problem = keyword.problem(value)
        if problem is not None:
            fix = keyword.fix(value).replace(f"write {name}=", f"pass {flag} ").replace(f"give {name} ",
                                                                                          f"give {flag} ")
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {problem}. Fix: {fix}")
        return value

    parse.__name__ = name  # argparse names the type in its own messages
    return parse


def _number(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def writable(path: object, flag: str, what: str) -> None:
    """``--json``/``--out`` checked before the work (never a traceback after it)."""
    if path is not None:
        check_writable(str(path), option=flag, what=what)


def usage_error(parser: argparse.ArgumentParser, exc: ConfigError) -> NoReturn:
    """Exit 2 with ``prog: error: <one line>``, the way argparse reports a bad flag."""
    parser.error(scrub(str(exc)))
