"""A short window under SGLang's own profiler: ``POST /start_profile``, a few requests, ``POST /stop_profile``.

SGLang 0.5.23's routes (``http_server.start_profile_async`` / ``stop_profile_async``; the body is
``io_struct.ProfileReq``): ``output_dir`` (where the scheduler writes, on the *server's* host),
``activities`` (``CPU``, ``GPU``: torch profiler activities; a CPU server is given ``CPU`` only),
``profile_id`` (the trace's file name: ``<profile_id>-TP-<rank>[-DP-<rank>...].trace.json.gz``),
``with_stack``/``record_shapes`` (off here: they make the trace large and the window slow),
``num_steps`` (not sent: the window ends with ``/stop_profile``, after the requests sent here). A route
missing (404, an older or a non-SGLang server) or refusing (an error status) is said in one line.

Every wait of the window is under one deadline; the trace directory's size is measured where it can be
read (a server on this host); a remote server's directory is named, not read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from pytest_sglang.server.client import make_client
from pytest_sglang.server.url import ServerURL

__all__ = ["ProfileWindow", "profile_window"]

#: Requests sent while the profiler runs: enough forward steps to show prefill and decode.
WINDOW_REQUESTS = 4
WINDOW_TOKENS = 16
_TRACE_GLOB = "*.trace.json*"


@dataclass(frozen=True)
class ProfileWindow:
    """What one profile window gave: the trace directory and files, or why there is none."""

    output_dir: Path
    taken: bool
    #: the trace files found in ``output_dir`` (empty when it is not on this host)
    files: tuple[Path, ...] = ()
    size_bytes: int = 0
    seconds: float = 0.0
    #: why no trace was taken, or what went wrong after it started
    problem: str = ""

    def line(self) -> str:
        """``trace in DIR (1 file, 12.3 KB, 2.1 s window)`` or ``NOT TAKEN: why``."""
        if not self.taken:
            return f"NOT TAKEN: {self.problem}"
        if not self.files:
            return (f"trace written by the server to {self.output_dir} (no trace file found there from this host"
                    f"{': ' + self.problem if self.problem else ''})")
        count = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''}"
        return (f"trace in {self.output_dir} ({count}, {self.size_bytes / 1024:,.1f} KB, {self.seconds:.1f} s "
                f"window{'; ' + self.problem if self.problem else ''})")


def _answer(resp: httpx.Response) -> str:
    return f"{resp.status_code} {' '.join(resp.text.split())[:160]!r}"


def _window_requests(client: httpx.Client, left: Callable[[], float]) -> list[str]:
    """Send the window's short greedy requests one after the other; what went wrong (empty when nothing did)."""
    for i in range(WINDOW_REQUESTS):
        request = {"text": f"Profile window request {i}: count from one to twenty.",
                   "sampling_params": {"max_new_tokens": WINDOW_TOKENS, "temperature": 0, "ignore_eos": True}}
        try:
            answered = client.post("/generate", json=request, timeout=left())
        except httpx.HTTPError as exc:
            return [f"a window request failed: {type(exc).__name__}"]
        if answered.status_code != 200:
            return [f"a window request answered {_answer(answered)}"]
    return []


def profile_window(url: str | ServerURL, api_key: str | None, output_dir: Path, *, deadline_s: float,
                   cpu: bool, profile_id: str) -> ProfileWindow:
    """Start SGLang's profiler, send :data:`WINDOW_REQUESTS` short requests, stop it; all within ``deadline_s``."""
    start = time.monotonic()
    end = start + deadline_s

    def left() -> float:
        return max(0.1, end - time.monotonic())

    body = {"output_dir": str(output_dir), "activities": ["CPU"] if cpu else ["CPU", "GPU"],
            "profile_id": profile_id, "with_stack": False, "record_shapes": False}
    with make_client(url, api_key, timeout=httpx.Timeout(left(), connect=5.0)) as client:
        try:
            resp = client.post("/start_profile", json=body, timeout=left())
        except httpx.HTTPError as exc:
            return ProfileWindow(output_dir, False, problem=f"POST /start_profile failed: {type(exc).__name__}: "
                                                            f"{exc}"[:200])
        if resp.status_code == 404:
            return ProfileWindow(output_dir, False, problem="the server has no /start_profile route (404): SGLang "
                                                            "0.5.23 serves it; an older or another server does not")
        if resp.status_code != 200:
            return ProfileWindow(output_dir, False, problem=f"POST /start_profile answered {_answer(resp)}")
        problems = _window_requests(client, left)
        try:
            resp = client.post("/stop_profile", timeout=left())
        except httpx.HTTPError as exc:
            problems.append(f"POST /stop_profile failed: {type(exc).__name__}")
        else:
            if resp.status_code != 200:
                problems.append(f"POST /stop_profile answered {_answer(resp)}")
    files = tuple(sorted(output_dir.glob(_TRACE_GLOB))) if output_dir.is_dir() else ()
    return ProfileWindow(output_dir, True, files, sum(f.stat().st_size for f in files),
                         time.monotonic() - start, "; ".join(problems))
