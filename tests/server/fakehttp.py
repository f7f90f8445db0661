"""Tiny in-process servers for readiness edge cases the simulator lacks.

``fake_server``: scripted HTTP answers per path. ``raw_server``: a TCP server that runs a function
per connection (hangs, closes, endless or compressed bodies: what no well-behaved HTTP server does).
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SERVER_INFO = json.loads(
    (Path(__file__).resolve().parents[2] / "fixtures" / "server_info" / "sglang-0.5.23.json").read_text()
)
Answer = tuple[int, str, str | None]  # status, body, content type
Route = Callable[[dict[str, str]], Answer]


def json_answer(payload: Any) -> Answer:
    return 200, json.dumps(payload), "application/json"


class Fake:
    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.hits: list[tuple[str, dict[str, str]]] = []
        self.url = ""


NOT_FOUND: Answer = (404, '{"detail":"Not Found"}', "application/json")  # SGLang's (FastAPI's) 404


@contextmanager
def fake_server(routes: dict[str, Route], port: int = 0, *, not_found: Answer = NOT_FOUND) -> Iterator[Fake]:
    """Serve ``routes`` (path -> answer; ``not_found`` otherwise) on 127.0.0.1:``port`` (0: a free one)."""
    fake = Fake(routes)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.hits.append((self.path, headers))
            route = fake.routes.get(self.path)
            status, body, ctype = route(headers) if route else not_found
            data = body.encode()
            self.send_response(status)
            if ctype:
                self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def sglang_twin(port: int, model_path: str) -> dict[str, Route]:
    """Routes answering like an SGLang server launched with ``--port PORT --model-path MODEL_PATH``."""
    info = {**SERVER_INFO, "port": port, "model_path": model_path, "served_model_name": model_path}
    return {"/health": lambda h: (200, "", None), "/server_info": lambda h: json_answer(info)}


Connection = Callable[[socket.socket, threading.Event], None]


@contextmanager
def raw_server(on_connection: Connection) -> Iterator[str]:
    """Run ``on_connection(sock, stopping)`` for every connection; yields the ``http://`` URL."""
    stopping = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                on_connection(self.request, stopping)
            except OSError:
                pass  # the client went away: expected for endless bodies and hangs

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()


def read_request(sock: socket.socket) -> str:
    """The request line and headers (the probes send no body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.decode("latin-1")
