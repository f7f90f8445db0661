"""Option values as text: the parsers of the option rows and how a value may be shown in messages.

Each parser raises ``ValueError`` with the problem, or the engine's ``ConfigError``; secrets are
masked when shown.

Parsers are pure and cheap; the ones that need an engine module (SGLang's flag table, the baseline's
limit syntax) import it only when such a value is given.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_sglang.plugin.launch_args import check_gateway, check_launch  # SGLang's flag table loads on first use

if TYPE_CHECKING:
    from pytest_sglang.server.url import ServerURL


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected one of true/false, 1/0, yes/no, on/off")


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected a number, e.g. 900 or 2.5") from None
    if not math.isfinite(value):  # nan and inf parse, but no deadline or budget can be one
        raise ValueError("expected a finite number, e.g. 900 or 2.5")
    return value


def parse_positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0:
        raise ValueError("must be a number greater than 0")
    return value


def parse_nonnegative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise ValueError("must be a number >= 0")
    return value


def parse_positive_int(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("expected a whole number, e.g. 4") from None
    if value < 1:
        raise ValueError("must be a whole number >= 1")
    return value


def parse_ab_launches(text: str) -> int:
    """Launches per side of an interleaved A/B run: paired differences need at least 2 pairs."""
    value = parse_positive_int(text)
    if value < 2:
        raise ValueError("must be at least 2 launches per side (one pair has no spread to judge by), e.g. 5")
    return value


def parse_seed(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("expected a whole number, e.g. 7") from None
    if value < 0:
        raise ValueError("must be a whole number >= 0, e.g. 7")
    return value


def parse_fraction(text: str) -> float:
    value = _float(text)
    if not 0 <= value <= 1:
        raise ValueError("must be a fraction between 0 and 1, e.g. 0.95")
    return value


def parse_margin(text: str) -> float:
    """``20%`` (or ``20``) -> 0.2: a margin in percent, from 0 % to below 100 %."""
    raw = text.strip()
    value = _float(raw.removesuffix("%").strip())
    if not raw.endswith("%") and 0 < value < 1:  # "0.2" meant as a fraction would be a 0.2 % margin
        raise ValueError(f"is ambiguous: {value:g}% or {value * 100:g}%? Write the percent sign, e.g. "
                         f"{value * 100:g}%")
    if not 0 <= value < 100:
        raise ValueError("must be a percentage from 0% to below 100%, e.g. 20%")
    return value / 100


def parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


def parse_text(text: str) -> str:
    """Any non-empty text without control characters (a NUL in a path is a traceback later)."""
    if not text.strip():
        raise ValueError("is empty")
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ValueError(f"contains the control character {bad!r}")
    return text


#: A run label is a commit, a tag or a version: shown on one line of the trend output.
RUN_LABEL_MAX = 100


def parse_run_label(text: str) -> str:
    """A commit or version (``3f4192f``, ``v0.5.24``): one line, at most :data:`RUN_LABEL_MAX` characters."""
    label = parse_text(text).strip()
    if len(label) > RUN_LABEL_MAX:
        raise ValueError(f"is {len(label)} characters long, more than {RUN_LABEL_MAX}: give a commit or a version, "
                         "such as $GITHUB_SHA or v0.5.24")
    return label


def parse_args(text: str) -> list[str]:
    """shlex-split (no shell is ever involved: the result is an argv list), never empty."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:  # e.g. "No closing quotation"
        raise ValueError(f"cannot be split like a shell command line ({exc})") from None
    if not argv:
        raise ValueError("is empty")
    for arg in argv:  # a NUL byte would be a traceback from the process launch, much later
        parse_text(arg)
    return argv


def parse_launch(text: str) -> list[str]:
    """shlex-split, then read as SGLang would (malformed values and ambiguous flags fail here)."""
    if not text.strip():
        raise ValueError("is empty: give launch_server args, e.g. --model-path Qwen/Qwen3-0.6B")
    argv = parse_args(text)
    check_launch(argv)  # typos (--tp-szie) refused here, before anything starts
    return argv


def parse_gateway(text: str) -> list[str]:
    """shlex-split gateway args, read by the recorded gateways' parsers (typos refused, keys registered)."""
    argv = parse_args(text)
    check_gateway(argv)
    return argv


def parse_env_pair(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key or not key.replace("_", "").isalnum() or not key.isascii():
        raise ValueError("expected KEY=VALUE")
    return text


def parse_regression_limits(text: str) -> str:
    """``5%`` or ``metric:pct,...``, checked by the baseline's own parser (imported only when given)."""
    parse_text(text)
    from pytest_sglang.report.baseline import parse_limits

    parse_limits(text)
    return text


def hide_env_value(text: str) -> str:
    """``KEY=VALUE`` -> ``KEY=***``: an environment value may be a token."""
    key, sep, _ = text.partition("=")
    return f"{key}=***" if sep else text


def hide_launch_secrets(text: str) -> str:
    """A launch or command string with its secrets masked as SGLang would read them (``--api-ke K``)."""
    from pytest_sglang.sglang.args import display_text  # only when such a value is shown

    return display_text(text)


def hide_gateway_secrets(text: str) -> str:
    """Gateway args with every credential masked as smg or sglang-router would read them (``--oracle-pass P``)."""
    from pytest_sglang.sglang.gateway_args import display_gateway_argv

    try:
        argv = shlex.split(text)
    except ValueError:
        argv = text.split()
    return " ".join(display_gateway_argv(argv))


def _as_is(text: str) -> str:
    return text


# ---- engine parsers, imported on first use: a run that never gives these options never loads them
def parse_url(text: str) -> ServerURL:
    """``--sglang-url``: :func:`pytest_sglang.server.url.parse_server_url`."""
    from pytest_sglang.server.url import parse_server_url

    return parse_server_url(text)


def hide_url_credentials(text: str) -> str:
    """``http://user:pw@host`` with the credentials masked (also in text that does not parse)."""
    from pytest_sglang.server.url import mask_userinfo

    return mask_userinfo(text)


def parse_gpus(text: str) -> str:
    from pytest_sglang.server.options.docker import parse_gpus_option

    return parse_gpus_option(text)


def parse_shm_size(text: str) -> str:
    from pytest_sglang.server.options.docker import parse_shm_size_option

    return parse_shm_size_option(text)


def parse_docker_memory(text: str) -> str:
    from pytest_sglang.server.options.docker import parse_memory_option

    return parse_memory_option(text)


def parse_volume(text: str) -> str:
    from pytest_sglang.server.options.docker import parse_volume_option

    return parse_volume_option(text)


def parse_ray_address(text: str) -> str:
    """``auto``, a GCS ``host:port`` or ``ray://host:port`` (syntax only; reached when first used)."""
    from pytest_sglang.server.options.ray import parse_address

    parse_address(text)
    return text.strip()


def parse_ray_strategy(text: str) -> str:
    """One of Ray's placement-group strategies, any case (``spread`` -> ``SPREAD``)."""
    from pytest_sglang.server.options.ray import check_strategy

    return check_strategy(text)
