"""Sync HTTP for the checks: one deadline per request, JSON or SSE, never an exception per answer.

The client is the plugin's (``sglang_client`` or ``SGLangServer.client()``): authenticated and with
every body capped. A check must see a 500, a malformed body or a hang as a *finding*, so these helpers
turn them into fields of :class:`Reply` / :class:`StreamReply` instead of raising.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from pytest_sglang import ledger
from pytest_sglang.correctness.deadline import Budget
from pytest_sglang.server.client import DEADLINE

JSON_HEADERS = {"Content-Type": "application/json"}
_DATA = "data:"


@dataclass
class Reply:
    """One non-streaming answer: ``status`` None when no HTTP answer came (``failure`` says why)."""

    status: int | None
    body: Any = None
    text: str = ""
    elapsed_s: float = 0.0
    failure: str | None = None

    def obj(self) -> dict[str, Any]:
        """The body when it is a JSON object, else an empty dict."""
        return self.body if isinstance(self.body, dict) else {}

    def describe(self) -> str:
        if self.status is None:
            return f"no answer: {self.failure}"
        return f"HTTP {self.status} {self.text[:300]!r}"


@dataclass
class StreamReply:
    """One SSE answer: the ``data:`` events in order, whether ``[DONE]`` ended it, what was odd."""

    status: int | None
    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    after_done: int = 0  # data lines after [DONE] (there must be none)
    bad_lines: list[str] = field(default_factory=list)  # data lines that are not JSON objects
    text: str = ""  # the body of a non-200 answer
    elapsed_s: float = 0.0
    failure: str | None = None

    def describe(self) -> str:
        if self.status is None:
            return f"no answer: {self.failure}"
        if self.status != 200:
            return f"HTTP {self.status} {self.text[:300]!r}"
        return f"{len(self.events)} events, [DONE] {'seen' if self.done else 'missing'}"


def _content(body: object) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def _request_args(timeout_s: float) -> dict[str, Any]:
    # httpx's timeout bounds each read; the DEADLINE extension bounds the whole body (CappedTransport).
    return {"timeout": httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            "extensions": {DEADLINE: time.monotonic() + timeout_s}}


def _failure(exc: Exception, timeout_s: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"no complete answer within {round(timeout_s, 2):g} s ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"


def _clipped(budget: Budget | None, timeout_s: float) -> tuple[float, str]:
    """The request's timeout under ``budget`` (CheckStalled when none is left) and why it was cut, if it was."""
    if budget is None:
        return timeout_s, ""
    clipped = budget.timeout(timeout_s)
    return clipped, f", cut short by {budget.what}" if clipped < timeout_s else ""


def _stalled(budget: Budget | None, exc: Exception, finding: str) -> None:
    """A timeout under a budget is a stall: the check ends with ``finding`` (CheckStalled)."""
    if budget is not None and isinstance(exc, httpx.TimeoutException):
        budget.stall(finding)


def post(client: httpx.Client, path: str, body: object, *, timeout_s: float, budget: Budget | None = None) -> Reply:
    """POST ``body`` (a JSON value, or raw bytes sent as they are) and read the whole answer.

    Under a ``budget`` (the acceptance suite's deadlines) a timeout ends the check: CheckStalled.
    """
    return _call(client, "POST", path, body, timeout_s, budget)


def get(client: httpx.Client, path: str, *, timeout_s: float, budget: Budget | None = None) -> Reply:
    return _call(client, "GET", path, None, timeout_s, budget)


def _call(client: httpx.Client, method: str, path: str, body: object, timeout_s: float,
          budget: Budget | None = None) -> Reply:
    timeout_s, cut = _clipped(budget, timeout_s)
    start = time.perf_counter()
    ledger.note_requests(1)  # what the run sent to the server, for the summary
    try:
        content = None if body is None else _content(body)
        resp = client.request(method, path, content=content, headers=JSON_HEADERS, **_request_args(timeout_s))
    except httpx.HTTPError as exc:
        failure = _failure(exc, timeout_s) + cut
        _stalled(budget, exc, f"{method} {path} stalled: {failure}")
        return Reply(None, elapsed_s=time.perf_counter() - start, failure=failure)
    reply = Reply(resp.status_code, text=resp.text, elapsed_s=time.perf_counter() - start)
    try:
        reply.body = resp.json()
    except ValueError:
        reply.body = None
    return reply


def stream(client: httpx.Client, path: str, body: object, *, timeout_s: float,
           until: Callable[[StreamReply], bool] | None = None, budget: Budget | None = None) -> StreamReply:
    """POST a streaming request and collect its ``data:`` events.

    ``until(reply)``: stop reading (and close the connection) once it returns True; this is how a
    client disconnects mid-stream. Under a ``budget`` a stream that does not end in time ends the
    check (CheckStalled), naming how far it got.
    """
    timeout_s, cut = _clipped(budget, timeout_s)
    start = time.perf_counter()
    reply = StreamReply(None)
    try:
        with client.stream("POST", path, content=_content(body), headers=JSON_HEADERS,
                           **_request_args(timeout_s)) as resp:
            reply.status = resp.status_code
            if resp.status_code != 200:
                reply.text = resp.read().decode("utf-8", "replace")
            else:
                for line in resp.iter_lines():
                    _feed(reply, line)
                    if until is not None and until(reply):
                        break
    except httpx.HTTPError as exc:
        reply.failure = _failure(exc, timeout_s) + cut
        _stalled(budget, exc, f"POST {path} (stream) stalled after {len(reply.events)} events without [DONE]: "
                              f"{reply.failure}")
    reply.elapsed_s = time.perf_counter() - start
    return reply


def _feed(reply: StreamReply, line: str) -> None:
    if not line.startswith(_DATA):
        return  # blank separators, comments and other SSE fields carry no payload here
    data = line[len(_DATA):].strip()
    if reply.done:
        reply.after_done += 1
        return
    if data == "[DONE]":
        reply.done = True
        return
    try:
        event = json.loads(data)
    except ValueError:
        event = None
    if isinstance(event, dict):
        reply.events.append(event)
    else:
        reply.bad_lines.append(data[:200])
