"""``--sim-trace FILE``: ground truth as JSON lines, for checking a client's measurements.

One ``{"event": "request", ...}`` line per finished request: arrival, admission, first-token and
last-token times and every chunk's send time, each as ``time.time()`` (``*_time``, comparable across
hosts) and ``time.perf_counter()`` (``*_perf``, CLOCK_MONOTONIC on Linux, so comparable with
``perf_counter()`` of another process on the same machine). Server events (``port_open``,
``server_up``) use the same two clocks, so a readiness probe's detection lag can be measured.
"""

from __future__ import annotations

import json
import time
from typing import IO, Any

from pytest_sglang.simulator.scheduling.request import Request


class Trace:
    def __init__(self, path: str | None) -> None:
        self._file: IO[str] | None = open(path, "a", buffering=1) if path else None
        # time.time() - perf_counter(), to express perf times on the wall clock.
        self._offset = time.time() - time.perf_counter()

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")

    def event(self, name: str, **extra: Any) -> None:
        perf = time.perf_counter()
        self._write({"event": name, "time": perf + self._offset, "perf": perf, **extra})

    def request(self, req: Request) -> None:
        if self._file is None:
            return
        off = self._offset
        chunks = req.sink.send_perf
        self._write(
            {
                "event": "request",
                "rid": req.rid,
                "endpoint": req.endpoint,
                "stream": req.stream,
                "arrival_time": req.arrival_perf + off,
                "arrival_perf": req.arrival_perf,
                "admitted_perf": req.admitted_perf,
                "first_token_time": req.first_perf + off if req.first_perf else None,
                "first_token_perf": req.first_perf or None,
                "last_token_time": req.last_perf + off if req.last_perf else None,
                "last_token_perf": req.last_perf or None,
                "first_chunk_perf": chunks[0] if chunks else None,
                "last_chunk_perf": chunks[-1] if chunks else None,
                "chunk_perf": chunks,
                "chunk_time": [c + off for c in chunks],
                "prompt_tokens": len(req.prompt_ids),
                "cached_tokens": req.cached,
                "cached_tokens_host": req.cached_host,
                "completion_tokens": len(req.out_ids),
                "finish_reason": req.finish,
                "aborted": req.aborted,
            }
        )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
