"""A thin httpx client factory for SGLang servers (Bearer auth, sane timeouts, no assertions).

SGLang's ``/health`` runs a one-token generation and may take up to ``SGLANG_HEALTH_CHECK_TIMEOUT``
(20 s) to answer, so the default read timeout is 30 s; connecting is local and fast.
"""

from __future__ import annotations

from typing import Any

import httpx

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


def auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer KEY`` (SGLang compares the scheme case-insensitively), or nothing."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def make_client(url: str, api_key: str | None = None, *, timeout: httpx.Timeout | float | None = None,
                **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` bound to ``url`` that authenticates with ``api_key`` when given."""
    headers = {**auth_headers(api_key), **kwargs.pop("headers", {})}
    return httpx.Client(base_url=url.rstrip("/"), headers=headers,
                        timeout=DEFAULT_TIMEOUT if timeout is None else timeout, **kwargs)


def make_async_client(url: str, api_key: str | None = None, *, timeout: httpx.Timeout | float | None = None,
                      **kwargs: Any) -> httpx.AsyncClient:
    """The async twin of :func:`make_client` (for the load generator)."""
    headers = {**auth_headers(api_key), **kwargs.pop("headers", {})}
    return httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers,
                             timeout=DEFAULT_TIMEOUT if timeout is None else timeout, **kwargs)
