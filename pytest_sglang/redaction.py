"""Keep secrets (API keys, tokens) out of everything pytest-sglang shows or stores.

SGLang's ``/server_info`` returns ``api_key``, ``admin_api_key`` and ``ssl_keyfile_password`` in clear
text, at the top level, inside every ``internal_states`` item and inside ``launch_command``. The
plugin registers every secret it learns (``--sglang-api-key``, secret-looking ``--sglang-env``
values, ``--api-key`` in launch args) in one process-wide registry, and every writer (terminal,
log file, error message, JSON/JUnit/HTML report) passes text through :func:`scrub`.
A process-wide registry is deliberate: an error message built anywhere must be scrubbed, and a
secret must never depend on the caller remembering to pass a scrubber along.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
REDACTED = "<redacted>"

#: Payload keys whose values are secrets (SGLang ServerArgs fields and our own names).
SECRET_KEYS = frozenset(
    {"api_key", "admin_api_key", "ssl_keyfile_password", "hf_token", "watermark_key", "watermark_key_b"}
)
#: Launch flags whose value is a secret.
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password")
#: Environment variable names that suggest a secret (HF_TOKEN, OPENAI_API_KEY, ...).
SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register(*values: str | None) -> None:
    """Remember secret values so that :func:`scrub` masks them everywhere from now on."""
    global _pattern
    with _lock:
        for value in values:
            # Very short values would mask ordinary text; 4+ chars is what real keys have.
            if value and len(value) >= 4:
                _secrets.add(value)
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None


def register_env(env: Mapping[str, str]) -> None:
    """Register the values of environment variables whose names look secret."""
    register(*(v for k, v in env.items() if is_secret_env_name(k)))


def register_launch_args(argv: Iterable[str]) -> None:
    """Register the values of ``--api-key`` style flags in SGLang launch args."""
    args = list(argv)
    for i, arg in enumerate(args):
        for flag in SECRET_FLAGS:
            if arg == flag and i + 1 < len(args):
                register(args[i + 1])
            elif arg.startswith(flag + "="):
                register(arg.split("=", 1)[1])


def is_secret_env_name(name: str) -> bool:
    return bool(SECRET_ENV_NAME.search(name))


def known() -> frozenset[str]:
    with _lock:
        return frozenset(_secrets)


def clear() -> None:
    """Forget every registered secret (tests only)."""
    global _pattern
    with _lock:
        _secrets.clear()
        _pattern = None


def scrub(text: str) -> str:
    """Return ``text`` with every registered secret replaced by ``***``."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(MASK, text)


def scrub_argv(argv: Iterable[str]) -> list[str]:
    """Mask secret flag values in an argv list (also values not yet registered)."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        flag = next((f for f in SECRET_FLAGS if arg == f or arg.startswith(f + "=")), None)
        if flag is None:
            out.append(scrub(arg))
        elif arg == flag:
            out.append(arg)
            mask_next = True
        else:
            out.append(f"{flag}={MASK}")
    return out


def scrub_payload(obj: Any) -> Any:
    """Deep-copy a JSON-like payload with secret keys redacted and secret values masked.

    Handles SGLang's leaks: secret keys at any depth (top level and ``internal_states``) and
    ``launch_command`` strings that contain ``--api-key VALUE``.
    """
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if key in SECRET_KEYS and value not in (None, ""):
                out[key] = REDACTED
            elif key == "launch_command" and isinstance(value, str):
                out[key] = " ".join(scrub_argv(value.split(" ")))
            else:
                out[key] = scrub_payload(value)
        return out
    if isinstance(obj, list):
        return [scrub_payload(v) for v in obj]
    if isinstance(obj, str):
        return scrub(obj)
    return obj
