"""Every body the engine reads whole is capped: an endless /server_info once took pytest to 4.1 GB."""

from __future__ import annotations

import gzip
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable

import pytest
from fakehttp import SERVER_INFO, fake_server, json_answer, raw_server, read_request

from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.server import attach
from pytest_sglang.server.client import MAX_BODY_BYTES, ResponseTooLarge, make_client

MiB = 2**20


def _endless_on(path: str) -> Callable[[socket.socket, threading.Event], None]:
    """/health answers 200 (empty); ``path`` sends a JSON-looking body that never ends."""

    def serve(sock: socket.socket, stopping: threading.Event) -> None:
        while not stopping.is_set():
            request = read_request(sock)
            if not request:
                return
            if request.split(" ")[1] != path:
                sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                continue
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n[")
            chunk = b"0," * 32768
            while not stopping.is_set():
                sock.sendall(chunk)
            return

    return serve


@pytest.mark.parametrize("path", ["/health", "/server_info"])
def test_an_endless_body_is_cut_at_the_cap_quickly_with_bounded_memory(path: str) -> None:
    with raw_server(_endless_on(path)) as url:
        tracemalloc.start()
        t0 = time.monotonic()
        try:
            with pytest.raises(ResponseTooLarge) as excinfo:
                attach(url, timeout_s=20)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert time.monotonic() - t0 < 10
    assert peak < 4 * MAX_BODY_BYTES, f"peak {peak / MiB:.0f} MiB"
    message = str(excinfo.value)
    assert message.startswith(f"GET {url}{path}: the response body exceeds 16 MiB; reading stopped there")
    assert "Fix: check that the URL points at an SGLang server" in message
    assert isinstance(excinfo.value, ServerUnavailable)


def test_metrics_and_every_handle_read_are_capped() -> None:
    big = "x" * (2 * MiB)
    routes = {"/health": lambda h: (200, "", None), "/server_info": lambda h: json_answer(SERVER_INFO),
              "/metrics": lambda h: (200, big, "text/plain")}
    with fake_server(routes) as fake:
        server = attach(fake.url)
        with pytest.raises(ResponseTooLarge, match="exceeds 1 MiB"), server.client(max_body_bytes=MiB) as client:
            client.get("/metrics")
        with server.client(max_body_bytes=None) as client:
            assert len(client.get("/metrics").text) == len(big)
        with pytest.raises(ServerUnavailable) as excinfo:  # under the default cap, but not prometheus text
            server.metrics()
    assert str(excinfo.value).startswith(f"SGLangServer {fake.url} mode=attach: GET /metrics is not Prometheus "
                                         "text (")
    assert len(str(excinfo.value)) < 1000


def test_a_gzip_bomb_is_inflated_under_the_same_cap() -> None:
    bomb = gzip.compress(b"\0" * (64 * MiB))  # ~64 kB on the wire

    def serve(sock: socket.socket, stopping: threading.Event) -> None:
        read_request(sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(bomb) + bomb)

    with raw_server(serve) as url, make_client(url, max_body_bytes=MiB) as client:
        with pytest.raises(ResponseTooLarge):
            client.get("/server_info")
    small = gzip.compress(b'{"ok": true}')

    def serve_small(sock: socket.socket, stopping: threading.Event) -> None:
        request = read_request(sock)
        assert "accept-encoding: identity" in request.lower()
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(small) + small)

    with raw_server(serve_small) as url, make_client(url) as client:
        assert client.get("/x").json() == {"ok": True}


def test_a_trickling_body_ends_at_the_request_deadline() -> None:
    def serve(sock: socket.socket, stopping: threading.Event) -> None:
        read_request(sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n[")
        while not stopping.wait(0.05):  # one byte every 50 ms: never a per-read timeout
            sock.sendall(b"0")

    with raw_server(serve) as url:
        t0 = time.monotonic()
        with pytest.raises(ServerUnavailable) as excinfo:
            attach(url, timeout_s=1.5)
    assert time.monotonic() - t0 < 5
    assert "no answer within" in str(excinfo.value)


def test_an_unknown_content_encoding_is_refused() -> None:
    def serve(sock: socket.socket, stopping: threading.Event) -> None:
        read_request(sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-encoding: br\r\ncontent-length: 3\r\n\r\nabc")

    with raw_server(serve) as url, make_client(url) as client:
        with pytest.raises(ServerUnavailable, match="Content-Encoding 'br' although the client asked for identity"):
            client.get("/x")
