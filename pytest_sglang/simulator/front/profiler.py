"""``/start_profile`` and ``/stop_profile`` as SGLang 0.5.23 answers them (a small trace file, no torch).

0.5.23 (``http_server.start_profile_async``, ``ProfileReq``, ``scheduler_components.profiler_manager``):

* ``GET|POST /start_profile`` with an optional JSON body: ``output_dir`` (default
  ``$SGLANG_TORCH_PROFILER_DIR`` or ``/tmp``), ``num_steps``, ``activities`` (``CPU``, ``GPU``, ``MEM``,
  ``RPD``; default CPU and GPU), ``profile_id`` (default the time), ``with_stack``, ``record_shapes``...
  It answers 200 ``Start profiling.`` (and a newline) with no Content-Type; a profile already running is a
  ``RuntimeError`` in the route, so a bare 500 ``Internal Server Error``.
* ``GET|POST /stop_profile`` writes ``<output_dir>/<profile_id>-TP-0.trace.json.gz`` (Chrome trace JSON,
  gzip) and answers 200 ``Stop profiling. This will take some time.`` (and a newline); without a running profile,
  500 as above.

The simulated trace holds one event per decode-token count and request count seen in the window. With
``num_steps`` the real profiler stops by itself after that many forward steps; here it stops at the
next ``/stop_profile`` (the window the plugin takes always ends with one). The fault
``--sim-fault no-profile-route`` removes both routes (a server built without them: 404).
"""

from __future__ import annotations

import gzip
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from pytest_sglang.simulator.state import State

__all__ = ["install"]

_STARTED = "Start profiling.\n"
_STOPPED = "Stop profiling. This will take some time.\n"
_ACTIVITIES = ("CPU", "GPU", "MEM", "RPD")


@dataclass
class _Window:
    output_dir: Path
    profile_id: str
    activities: list[str]
    start_s: float
    requests: int
    tokens: int


def _bare(text: str, status: int = 200) -> web.Response:
    resp = web.Response(body=text.encode(), status=status)
    resp["pytest_sglang.bare"] = True  # FastAPI's Response(content=...) sends no Content-Type
    return resp


def _error() -> web.Response:
    return web.Response(text="Internal Server Error", status=500)


def _unprocessable(loc: str, msg: str) -> web.Response:
    return web.json_response({"detail": [{"type": "value_error", "loc": ["body", loc], "msg": msg}]}, status=422)


class _Profiler:
    def __init__(self, state: State) -> None:
        self.state = state
        self.window: _Window | None = None

    def _counts(self) -> tuple[int, int]:
        stats = self.state.engine.stats
        return sum(stats.requests.values()), sum(stats.generation_tokens.values())

    async def start(self, request: web.Request) -> web.Response:
        body: object = {}
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return _unprocessable("body", "JSON decode error")
        if body is None:
            body = {}
        if not isinstance(body, dict):
            return _unprocessable("body", "Input should be a valid dictionary or object")
        output_dir = body.get("output_dir") or os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp")
        activities = body.get("activities") or ["CPU", "GPU"]
        if not isinstance(output_dir, str):
            return _unprocessable("output_dir", "Input should be a valid string")
        if not isinstance(activities, list) or not all(a in _ACTIVITIES for a in activities):
            return _unprocessable("activities", "Input should be a list of CPU, GPU, MEM, RPD")
        if self.window is not None:  # "Profiling is already in progress. Call /stop_profile first."
            self.state.log.info("Profiling is already in progress. Call /stop_profile first.")
            return _error()
        requests, tokens = self._counts()
        profile_id = str(body.get("profile_id") or time.time())
        self.window = _Window(Path(output_dir).expanduser(), profile_id, list(activities), time.time(), requests,
                              tokens)
        self.state.log.info(f"Profiling starts. Traces will be saved to: {output_dir} (with profile id: "
                            f"{profile_id})")
        return _bare(_STARTED)

    async def stop(self, request: web.Request) -> web.Response:
        window, self.window = self.window, None
        if window is None:  # "Profiling is not in progress. Call /start_profile first."
            self.state.log.info("Profiling is not in progress. Call /start_profile first.")
            return _error()
        requests, tokens = self._counts()
        now = time.time()
        trace = {"traceEvents": [
            {"name": "simulated forward window", "ph": "X", "ts": window.start_s * 1e6,
             "dur": (now - window.start_s) * 1e6, "pid": 0, "tid": 0,
             "args": {"requests": requests - window.requests, "generated_tokens": tokens - window.tokens,
                      "activities": window.activities}},
        ], "displayTimeUnit": "ms"}
        try:
            window.output_dir.mkdir(parents=True, exist_ok=True)
            path = window.output_dir / f"{window.profile_id}-TP-0.trace.json.gz"
            path.write_bytes(gzip.compress(json.dumps(trace).encode()))
        except OSError as exc:
            self.state.log.info(f"Stop profiling failed: {exc}")
            return _error()
        self.state.log.info("Stop profiling...")
        return _bare(_STOPPED)


def install(app: web.Application, state: State) -> None:
    if state.cfg.faults.production.no_profile_route:
        return
    profiler = _Profiler(state)
    for method in ("GET", "POST"):
        app.router.add_route(method, "/start_profile", profiler.start)
        app.router.add_route(method, "/stop_profile", profiler.stop)
