"""A tiny in-process HTTP server with scripted answers, for readiness edge cases the simulator lacks."""

from __future__ import annotations

import json
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


@contextmanager
def fake_server(routes: dict[str, Route]) -> Iterator[Fake]:
    fake = Fake(routes)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.hits.append((self.path, headers))
            route = fake.routes.get(self.path)
            status, body, ctype = (
                route(headers) if route else (404, '{"detail":"Not Found"}', "application/json")
            )
            data = body.encode()
            self.send_response(status)
            if ctype:
                self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
