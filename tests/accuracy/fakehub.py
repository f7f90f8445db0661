"""A loopback stand-in for the Hugging Face hub (``HF_ENDPOINT``): one dataset file, or misbehaving."""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).parent / "data"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    """What the fake hub serves (``files``: URL path suffix -> bytes) and how it misbehaves."""

    files: dict[str, bytes]
    stall_get: bool = False
    announce_size: int | None = None
    requests: list[str] = field(default_factory=list)
    url: str = ""
    release: threading.Event = field(default_factory=threading.Event)


def handler(hub: FakeHub) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # keep the test output clean
            pass

        def _head(self) -> bytes | None:
            hub.requests.append(f"{self.command} {self.path}")
            body = next((b for suffix, b in hub.files.items() if self.path.endswith(suffix)), None)
            self.send_response(404 if body is None else 200)
            size = len(body) if body is not None else 0
            self.send_header("Content-Length", str(hub.announce_size or size))
            if body is not None:
                self.send_header("ETag", '"fake-etag"')
                self.send_header("X-Repo-Commit", COMMIT)
            self.end_headers()
            return body

        def do_HEAD(self) -> None:
            self._head()

        def do_GET(self) -> None:
            if hub.stall_get:
                hub.requests.append(f"GET {self.path} (stalled)")
                hub.release.wait(30)
                return
            body = self._head()
            if body is not None:
                self.wfile.write(body)

    return Handler


