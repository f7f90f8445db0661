"""The engine's httpx client: one TLS context for all its clients."""

from __future__ import annotations

import ssl

import certifi
import httpx
import pytest

from pytest_sglang.server import client as client_module
from pytest_sglang.server.client import make_client


def test_clients_share_one_tls_context_per_ca_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx loads the whole CA bundle per client (20-200 ms); the engine makes a client per call,
    # and two of those sat between a server's first /health 200 and the first test body.
    built: list[bool] = []
    real = httpx.create_ssl_context

    def counting(*args: object, **kwargs: object) -> object:
        built.append(True)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    client_module._tls_context.cache_clear()
    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    for _ in range(3):
        make_client("http://127.0.0.1:1").close()
    assert len(built) == 1
    # Verification is httpx's default, and a changed CA setting is honoured (a context of its own).
    assert client_module.tls_context().verify_mode == ssl.CERT_REQUIRED
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    make_client("https://127.0.0.1:1").close()
    assert len(built) == 2
