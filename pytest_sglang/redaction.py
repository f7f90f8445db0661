"""Keep secrets (API keys, tokens) out of everything pytest-sglang shows or stores.

SGLang's ``/server_info`` returns ``api_key``, ``admin_api_key`` and ``ssl_keyfile_password`` in clear
text, at the top level, inside every ``internal_states`` item and inside ``launch_command``. The
plugin registers every secret it learns (``--sglang-api-key``, secret-looking ``--sglang-env``
values, the secrets of the launch args as SGLang reads them: ``--api-key``, ``--api-ke=...``, in
``--sglang-command`` too) in one process-wide registry, and every writer (terminal,
log file, error message, JSON/JUnit/HTML report) passes text through :func:`scrub`.
A process-wide registry is deliberate: an error message built anywhere must be scrubbed, and a
secret must never depend on the caller remembering to pass a scrubber along.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping

MASK = "***"
REDACTED = "<redacted>"

#: Payload keys whose values are secrets (SGLang ServerArgs fields and our own names).
SECRET_KEYS = frozenset({"api_key", "admin_api_key", "ssl_keyfile_password", "hf_token", "watermark_key",
                         "watermark_key_b", "watermark_config"})
#: Environment variable names that suggest a secret (HF_TOKEN, OPENAI_API_KEY, PGPASSWORD, MYSQL_PWD,
#: SSH_PRIVATE_KEY, AWS_CREDENTIALS, ...). Broad on purpose: a masked harmless value costs nothing.
SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASS|PWD|PRIVATE|CRED|AUTH|COOKIE|SESSION)", re.IGNORECASE)
#: Values never registered as secrets, whatever their variable's name: registering ``true`` (say from
#: ``SGLANG_DIAG_BYPASS_HEALTH_GENERATE=true``) would mask every ``true`` in every report.
_NOT_SECRETS = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off", "auto"})

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register(*values: str | None) -> None:
    """Remember secret values so that :func:`scrub` masks them everywhere from now on."""
    global _pattern
    with _lock:
        for value in values:
            # Very short values would mask ordinary text; 4+ chars is what real keys have.
            if value and len(value) >= 4 and value.lower() not in _NOT_SECRETS and not _small_number(value):
                _secrets.add(value)
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None


def _small_number(value: str) -> bool:
    # A port or a count (SGLANG_HEALTH_CHECK_TIMEOUT=20) masked everywhere would garble every report.
    return value.isdigit() and len(value) < 8


def register_env(env: Mapping[str, str]) -> None:
    """Register the values of environment variables whose names look secret."""
    register(*(v for k, v in env.items() if is_secret_env_name(k)))


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


#: ANSI escape sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks) and two-byte escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -/]*[0-~])")
#: C0/C1 control characters except tab and newline, and the bidi overrides that reorder shown text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str) -> str:
    """``text`` without ANSI escape sequences and control characters, safe to put in a message.

    For server-provided text (log tails, response bodies): a hostile or merely colourful server
    must not move the cursor, retitle the terminal or hide lines of our report.
    """
    return _CONTROL.sub("", _ANSI.sub("", text))


#: ``scheme://user:password@`` anywhere in a text (a worker URL inside a metric name, a log line).
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][\w+.-]*://)(?P<user>[^/?#@:\s]*)(?P<password>:[^/?#@\s]*)?@")


def mask(text: str) -> str:
    """The one mask for free text every writer applies: registered secrets and URL credentials.

    A user name alone (``https://TOKEN@host``) is often a token, so it is masked too.
    """
    def hide(m: re.Match[str]) -> str:
        return f"{m['scheme']}{m['user']}:{MASK}@" if m["password"] is not None else f"{m['scheme']}{MASK}@"

    return scrub(_URL_CREDENTIALS.sub(hide, text))
