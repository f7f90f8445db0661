"""The httpx client for SGLang servers: auth, sane timeouts, and a size cap on every body it reads.

SGLang's ``/health`` runs a one-token generation and may take up to ``SGLANG_HEALTH_CHECK_TIMEOUT``
(20 s) to answer, so the default read timeout is 30 s; connecting is local and fast.

Every body read through these clients is capped (:data:`MAX_BODY_BYTES`): a server that streams an
endless ``/server_info`` once drove pytest to 4.1 GB. The cap sits in the transport, so it holds for
every request of the client (``client.get(...)`` reading whole, ``client.stream(...)`` too), and it
counts decoded bytes: the client asks for ``Accept-Encoding: identity`` and inflates a gzip/deflate
body itself, under the same cap, so a compressed bomb cannot grow past it either.
"""

from __future__ import annotations

import functools
import os
import ssl
import time
import zlib
from collections.abc import Iterable, Iterator

import httpx

from pytest_sglang.defaults import CLIENT_KEEPALIVE_S
from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.server.url import ServerURL, parse_server_url

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
#: The largest body read: a 0.5.23 ``/server_info`` is ~40 kB and ``/metrics`` a few hundred kB, so
#: 16 MiB is far above any real answer and far below trouble.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: ``extensions={DEADLINE: monotonic_time}`` on a request: the whole body must arrive by then (a
#: body trickling one byte per second never trips a per-read timeout).
DEADLINE = "pytest_sglang.deadline"
_INFLATE = ("gzip", "x-gzip", "deflate")


def deadline_in(seconds: float) -> dict[str, object]:
    """``extensions=`` for one request whose whole body must arrive within ``seconds`` from now."""
    return {DEADLINE: time.monotonic() + seconds}


class ResponseTooLarge(ServerUnavailable):
    """A response body exceeded the client's cap (reading stopped there)."""

    def __init__(self, method: str, url: str, limit: int) -> None:
        self.url = url
        self.limit = limit
        super().__init__(
            f"{method} {url}: the response body exceeds {format_bytes(limit)}; reading stopped there "
            "(a real SGLang answer is far smaller: /server_info is ~40 kB).\n"
            "Fix: check that the URL points at an SGLang server (not a download or an endless stream); "
            "for a known large answer pass max_body_bytes= to SGLangServer.client().")


def format_bytes(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


def auth_header(api_key: str | None, url: ServerURL | None = None) -> dict[str, str]:
    """``Authorization: Bearer KEY``, else Basic from the URL's user:password, else nothing.

    One header only: the API key wins (SGLang understands Bearer only; see ServerURL.auth_note).
    """
    if api_key:
        return {"Authorization": f"Bearer {api_key}"}  # SGLang compares the scheme case-insensitively
    basic = url.basic_auth() if url is not None else None
    return {"Authorization": basic} if basic else {}


def as_server_url(url: str | ServerURL) -> ServerURL:
    """``url`` as a :class:`ServerURL` (a string is parsed; credentials move out of the URL)."""
    return url if isinstance(url, ServerURL) else parse_server_url(url, source="url")


def make_client(url: str | ServerURL, api_key: str | None = None, *, timeout: httpx.Timeout | float | None = None,
                headers: dict[str, str] | None = None, max_body_bytes: int | None = MAX_BODY_BYTES,
                trust_env: bool = True) -> httpx.Client:
    """An ``httpx.Client`` bound to ``url``, authenticated, every body capped at ``max_body_bytes``.

    ``max_body_bytes=None`` lifts the cap (for a caller that bounds its own reads).
    """
    target = as_server_url(url)
    transport: httpx.BaseTransport = httpx.HTTPTransport(
        verify=tls_context(trust_env), trust_env=trust_env, limits=httpx.Limits(keepalive_expiry=CLIENT_KEEPALIVE_S))
    if max_body_bytes is not None:
        transport = CappedTransport(transport, max_body_bytes)
    return httpx.Client(base_url=target.base, transport=transport, trust_env=trust_env,
                        headers={"Accept-Encoding": "identity", **auth_header(api_key, target), **(headers or {})},
                        timeout=DEFAULT_TIMEOUT if timeout is None else timeout)


def tls_context(trust_env: bool = True) -> ssl.SSLContext:
    """The verifying TLS context httpx would build, built once per process (and per CA setting), then shared.

    httpx builds one per client by loading the whole CA bundle (20-200 ms on a busy machine), and the
    engine makes a client per call (``info()``, ``health()``, each probe): that cost sat between a
    server's first ``/health`` 200 and the test body. Same verification as httpx's default:
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when ``trust_env``, else certifi's bundle.
    """
    env = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if trust_env else (None, None)
    return _tls_context(trust_env, *env)


@functools.cache
def _tls_context(trust_env: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    # The environment values are part of the key: a changed SSL_CERT_FILE gets its own context.
    return httpx.create_ssl_context(trust_env=trust_env)


class CappedTransport(httpx.BaseTransport):
    """Wraps a transport: each response body is inflated (gzip/deflate) and cut at ``limit`` bytes."""

    def __init__(self, inner: httpx.BaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        headers = httpx.Headers(response.headers)
        encoding = headers.get("content-encoding", "identity").strip().lower()
        raw = response.stream
        if not isinstance(raw, httpx.SyncByteStream):  # a sync transport always gives one
            raise TypeError(f"expected a sync byte stream, got {type(raw).__name__}")
        chunks: Iterable[bytes] = raw
        if encoding in _INFLATE:
            chunks = _inflate(chunks, self._limit)
            del headers["content-encoding"]
            headers.pop("content-length", None)
        elif encoding not in ("identity", ""):
            response.close()
            raise ServerUnavailable(
                f"{request.method} {request.url}: the server sent Content-Encoding {encoding!r} although the "
                "client asked for identity.\nFix: point the URL at the SGLang server itself, or configure "
                "the proxy in front of it not to compress.")
        deadline = request.extensions.get(DEADLINE)
        stream = _CappedStream(chunks, response, request, self._limit, deadline)
        return httpx.Response(response.status_code, headers=headers, stream=stream,
                              extensions=response.extensions, request=request)

    def close(self) -> None:
        self._inner.close()


class _CappedStream(httpx.SyncByteStream):
    def __init__(self, chunks: Iterable[bytes], response: httpx.Response, request: httpx.Request, limit: int,
                 deadline: float | None) -> None:
        self._chunks = chunks
        self._response = response
        self._request = request
        self._limit = limit
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self._chunks:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge(self._request.method, str(self._request.url), self._limit)
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise httpx.ReadTimeout("the body did not arrive before the deadline", request=self._request)
            yield chunk

    def close(self) -> None:
        self._response.close()


def _inflate(chunks: Iterable[bytes], limit: int) -> Iterator[bytes]:
    """Decompress gzip or zlib data, never more than ``limit + 1`` bytes per step (bounded memory)."""
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # |32: detect the gzip or zlib header
    try:
        for chunk in chunks:
            data = decoder.decompress(chunk, limit + 1)
            yield data
            while decoder.unconsumed_tail:
                yield decoder.decompress(decoder.unconsumed_tail, limit + 1)
        yield decoder.flush()
    except zlib.error as exc:
        raise httpx.DecodingError(f"the compressed body is corrupt: {exc}") from None
