"""A server URL, parsed once: :func:`parse_server_url` -> :class:`ServerURL` (credentials kept apart).

``--sglang-url http://user:pw@host:30000`` must never show ``pw`` anywhere and must not reach the
HTTP clients as a URL with user info (aiohttp refuses such a URL next to an ``Authorization``
header, and every message that quotes a URL would repeat the password). So the text is parsed once
at the boundary into a typed value: :attr:`ServerURL.base` is the clean URL every client uses,
``str()`` / ``repr()`` are the masked display form (``http://user:***@host:30000``), and the
credentials travel only as HTTP Basic auth (:meth:`ServerURL.basic_auth`).

Bad text is a :class:`~pytest_sglang.errors.ConfigError` naming the option, the (masked) value and
the fix, at once: a URL without a scheme used to be retried for 30 s as "does not accept
connections".
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import SplitResult, quote, unquote, urlsplit

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError

SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
#: A host name (letters, digits, ``-``, ``_``, ``.``; non-ASCII for IDNA names) or an IPv6 literal.
_HOST = re.compile(r"^(?:[\w.-]+|[0-9A-Fa-f:.]+(?:%\w+)?)$")
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][\w+.-]*://)?(?P<user>[^/?#@:]*)(?P<password>:[^/?#@]*)?@")
_HTTP_TYPO = re.compile(r"^https?:/*", re.IGNORECASE)  # "http:/host", "http:host"
_CONTROL = re.compile(r"[\x00-\x20\x7f]")

_Bad = Callable[[str, str], ConfigError]


@dataclass(frozen=True)
class ServerURL:
    """An http(s) server address with optional credentials; ``str()`` masks the password."""

    scheme: str
    host: str  # an IPv6 literal is kept without brackets
    port: int
    path: str = ""  # a base path prefix (e.g. a gateway's ``/sglang``), no trailing slash
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def base(self) -> str:
        """The clean base URL (no credentials), e.g. ``http://127.0.0.1:30000``."""
        return f"{self.scheme}://{self.netloc}{self.path}"

    @property
    def display(self) -> str:
        """The URL for every message and report: ``user:***@`` with a password, ``***@`` without one."""
        if not self.has_credentials:
            return self.base
        return f"{self.scheme}://{_masked_userinfo(self.username or '', self.password)}@{self.netloc}{self.path}"

    @property
    def has_credentials(self) -> bool:
        return self.username is not None or self.password is not None

    def unmasked(self) -> str:
        """The URL with its credentials, percent-encoded: for handing to another process only, never shown."""
        if not self.has_credentials:
            return self.base
        user = quote(self.username or "", safe="")
        secret = f":{quote(self.password, safe='')}" if self.password is not None else ""
        return f"{self.scheme}://{user}{secret}@{self.netloc}{self.path}"

    def basic_auth(self) -> str | None:
        """The ``Authorization: Basic ...`` value for the URL's credentials, or None without any."""
        if not self.has_credentials:
            return None
        token = f"{self.username or ''}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(token).decode("ascii")

    def auth_note(self, api_key_given: bool) -> str | None:
        """Which credentials are sent, when the URL carries some (None otherwise)."""
        if not self.has_credentials:
            return None
        if api_key_given:
            # One Authorization header: SGLang itself only understands Bearer, so the key wins.
            return "the API key wins (Authorization: Bearer); the URL's user:password is not sent"
        return "the URL's user:password is sent as HTTP Basic auth"

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"ServerURL({self.display!r})"


def _masked_userinfo(user: str, password: str | None) -> str:
    # A user name alone is often a token (``https://TOKEN@host``): then it is the secret.
    return f"{user}:{redaction.MASK}" if password is not None else redaction.MASK


def mask_userinfo(text: str) -> str:
    """``text`` with the credentials of a ``scheme://user:pw@`` prefix masked (also in unparseable text)."""
    return _USERINFO.sub(lambda m: f"{m['scheme'] or ''}{_masked_userinfo(m['user'], m['password'])}@", text)


def parse_server_url(text: str, *, source: str = "--sglang-url") -> ServerURL:
    """Parse ``text`` (``http://host:port[/prefix]``); a bad value is a ConfigError naming ``source``.

    The password, if any, is registered as a secret at once: from here on, every scrubbed output
    masks it even where the raw text was copied (pytest's own option values, tracebacks).
    """
    raw = text.strip()
    shown = mask_userinfo(raw)

    def bad(problem: str, fix: str) -> ConfigError:
        return ConfigError(source, shown, problem, fix)

    if not raw:
        raise bad("the URL is empty", "give the server's address, e.g. http://127.0.0.1:30000")
    if _CONTROL.search(raw):
        raise bad("the URL contains spaces or control characters",
                  "give one URL without spaces, e.g. http://127.0.0.1:30000")
    if "://" not in raw:
        rest = _HTTP_TYPO.sub("", shown)
        raise bad("the URL has no scheme://", f"write http://{rest} (or https:// for a TLS endpoint)")
    try:
        parts = urlsplit(raw)
    except ValueError:  # e.g. "http://[::1" (an unclosed IPv6 bracket)
        raise bad("the URL cannot be parsed", "write http://HOST:PORT, e.g. http://[::1]:30000") from None
    _register(parts)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise bad(f"the scheme {scheme}:// is not supported (SGLang serves HTTP)",
                  f"write http://{shown.split('://', 1)[1]} (or https:// behind a TLS proxy)")
    return _build(parts, scheme, shown, bad)


def _register(parts: SplitResult) -> None:
    secret = parts.password if parts.password is not None else parts.username
    if secret:
        # Both forms: the decoded secret and the percent-encoded text as typed.
        redaction.register(unquote(secret), secret)


def _build(parts: SplitResult, scheme: str, shown: str, bad: _Bad) -> ServerURL:
    host = parts.hostname or ""
    if not host:
        raise bad("the URL has no host", "write the server's host and port, e.g. http://127.0.0.1:30000")
    if not _HOST.match(host):
        raise bad(f"{host!r} is not a host name or IP address",
                  "write the server's host and port, e.g. http://127.0.0.1:30000")
    try:
        port = parts.port
    except ValueError:
        raise bad("the port is not a number from 1 to 65535",
                  "write a port from 1 to 65535, e.g. http://127.0.0.1:30000") from None
    if port == 0:
        raise bad("port 0 is not a server's port", "write the port the server listens on, e.g. :30000")
    if "?" in shown or "#" in shown:
        raise bad("the URL has a query or fragment",
                  "give the server's base URL only, e.g. http://127.0.0.1:30000")
    return ServerURL(scheme=scheme, host=host, port=port if port is not None else DEFAULT_PORTS[scheme],
                     path=parts.path.rstrip("/"),
                     username=unquote(parts.username) if parts.username is not None else None,
                     password=unquote(parts.password) if parts.password is not None else None)
