"""Wait until a server is ready: ONE tenacity loop, ONE deadline, fail fast when the process dies.

Ready means: ``GET /health`` answers 200 (judged by status code only: SGLang's body is empty), then
``/server_info`` (``/get_server_info`` on 404, older SGLang) parses and validates. The /health probe
may run a one-token generation (up to ~20 s on a busy server), hence its long timeout.

Polling starts at 50 ms and backs off gently to 0.5 s while the port is closed; once the server
answers HTTP (warmup, 503) it polls every 0.1 s, so the 503 -> 200 flip is seen quickly. Sleeps are
sliced: process death and new log phases are noticed within ~50 ms. Tenacity's RetryError never
reaches the user: it is translated into ServerExited / ServerNotReady / ServerUnavailable with
the phase reached, the last probe, the log tail and the fix.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception_type
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError, SchemaMismatch
from pytest_sglang.server import diagnosis
from pytest_sglang.server.phases import LogFollower
from pytest_sglang.server.runner import RunningProcess
from pytest_sglang.server.validation import SchemaWarning, not_json_error, validate_payload

HEALTH_PROBE_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 2.0
FIRST_POLL_S = 0.05
MAX_POLL_S = 0.5
ANSWERING_POLL_S = 0.1
SLICE_S = 0.05
#: Attach mode: how long a refused connection is retried before ServerUnavailable.
ATTACH_REFUSED_GRACE_S = 1.0


class NotReadyYet(Exception):
    """One probe said "not yet" (retried until the deadline)."""


@dataclass
class WaitState:
    """What the loop learned so far (also the evidence of the error messages)."""

    started: float
    deadline: float
    probes: int = 0
    last_probe: str = "none yet"
    answered: bool = False  # the server answered HTTP at least once
    refused_since: float | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


@dataclass
class ReadyResult:
    info: dict[str, Any] | None
    info_endpoint: str
    probes: int
    elapsed_s: float


@dataclass
class Target:
    """What is being waited for."""

    url: str
    mode: str
    api_key: str | None = None
    validate: str = "strict"
    process: RunningProcess | None = None
    follower: LogFollower | None = None
    health_timeout_s: float = HEALTH_PROBE_TIMEOUT_S

    def exited(self) -> bool:
        return self.process is not None and self.process.exit_status() is not None


class _deadline(stop_base):
    def __init__(self, state: WaitState) -> None:
        self.state = state

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() >= self.state.deadline


class _process_exited(stop_base):
    def __init__(self, target: Target) -> None:
        self.target = target

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.target.exited()


class _refused_too_long(stop_base):
    """Attach mode: nothing listens at the URL (a server that is up never refuses connections)."""

    def __init__(self, state: WaitState) -> None:
        self.state = state

    def __call__(self, retry_state: RetryCallState) -> bool:
        since = self.state.refused_since
        return since is not None and time.monotonic() - since >= ATTACH_REFUSED_GRACE_S


class _poll_wait(wait_base):
    """50 ms growing by 1.5x to 0.5 s; 0.1 s once the server answers HTTP (warming up)."""

    def __init__(self, state: WaitState) -> None:
        self.state = state

    def __call__(self, retry_state: RetryCallState) -> float:
        cap = ANSWERING_POLL_S if self.state.answered else MAX_POLL_S
        wait = min(cap, FIRST_POLL_S * 1.5 ** (retry_state.attempt_number - 1))
        return max(0.0, min(wait, self.state.deadline - time.monotonic()))


def _watchful_sleep(target: Target) -> Any:
    """A sleep that returns early when the process exits or the log announces the HTTP server."""

    def sleep(seconds: float) -> None:
        end = time.monotonic() + seconds
        follower = target.follower
        phase = follower.report.phase if follower is not None else None
        while (left := end - time.monotonic()) > 0:
            if target.exited():
                return
            if follower is not None:
                follower.poll()
                now_phase = follower.report.phase
                if now_phase != phase and now_phase in ("warming up", "ready"):
                    return
            time.sleep(min(left, SLICE_S))

    return sleep


def wait_until_ready(target: Target, deadline_s: float, *, started: float | None = None) -> ReadyResult:
    """Probe ``target`` until ready; raise a typed, explained error otherwise.

    ``deadline_s`` counts from ``started`` (monotonic; default now), so a launch's one deadline
    covers spawning, loading and warmup alike.
    """
    t0 = time.monotonic() if started is None else started
    state = WaitState(started=t0, deadline=t0 + deadline_s)
    stop = _deadline(state) | _process_exited(target)
    if target.mode == "attach":
        stop = stop | _refused_too_long(state)
    retrying = Retrying(stop=stop, wait=_poll_wait(state), sleep=_watchful_sleep(target),
                        retry=retry_if_exception_type(NotReadyYet), reraise=False)
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    with httpx.Client(base_url=target.url, headers=headers, trust_env=False) as client:
        try:
            for attempt in retrying:
                with attempt:
                    info, endpoint = _probe(client, target, state)
                    return ReadyResult(info, endpoint, state.probes, state.elapsed_s)
        except RetryError:
            pass
    raise diagnosis.start_failure(target, state)


def _probe(client: httpx.Client, target: Target, state: WaitState) -> tuple[dict[str, Any] | None, str]:
    state.probes += 1
    # Never wait on one probe past the deadline (by more than a moment).
    timeout = max(0.25, min(target.health_timeout_s, state.deadline - time.monotonic()))
    response = _get(client, "/health", state, timeout)
    if response.status_code != 200:
        state.last_probe = f"GET /health -> {response.status_code}"
        raise NotReadyYet(state.last_probe)
    return fetch_info(client, target, state)


def _get(client: httpx.Client, path: str, state: WaitState, timeout: float) -> httpx.Response:
    try:
        response = client.get(path, timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S))
    except httpx.ConnectError as exc:
        state.last_probe = f"GET {path} -> connection refused ({exc})"
        if state.refused_since is None:
            state.refused_since = time.monotonic()
        raise NotReadyYet(state.last_probe) from None
    except httpx.TimeoutException:
        # Near the deadline the probe timeout is clamped to what is left: say so instead of "within 0s".
        within = f"{timeout:.0f}s" if timeout >= 1 else f"{timeout:.2f}s (the rest of the startup deadline)"
        state.last_probe = f"GET {path} -> no answer within {within}"
        raise NotReadyYet(state.last_probe) from None
    except httpx.TransportError as exc:
        state.last_probe = f"GET {path} -> {type(exc).__name__}: {redaction.scrub(str(exc))}"
        raise NotReadyYet(state.last_probe) from None
    state.answered, state.refused_since = True, None
    return response


def fetch_info(client: httpx.Client, target: Target, state: WaitState) -> tuple[dict[str, Any] | None, str]:
    """``/server_info`` (or ``/get_server_info`` on 404), parsed and validated per ``target.validate``."""
    endpoint = "/server_info"
    response = _get(client, endpoint, state, target.health_timeout_s)
    if response.status_code == 404:
        endpoint = "/get_server_info"
        response = _get(client, endpoint, state, target.health_timeout_s)
    if response.status_code in (401, 403):
        raise ConfigError("--sglang-api-key", "***" if target.api_key else None,
                          f"GET {endpoint} at {target.url} answered {response.status_code} "
                          f"{redaction.scrub(response.text[:80])}",
                          "pass the server's --api-key as --sglang-api-key (ini sglang_api_key, env "
                          "PYTEST_SGLANG_API_KEY or SGLANG_API_KEY)")
    if response.status_code != 200:
        state.last_probe = f"GET {endpoint} -> {response.status_code}"
        raise NotReadyYet(state.last_probe)
    state.last_probe = f"GET {endpoint} -> 200"
    return check_info(response, endpoint, target.validate), endpoint


def check_info(response: httpx.Response, endpoint: str, validate: str) -> dict[str, Any] | None:
    """Parse and validate a server_info response; strict raises, warn warns, off only parses."""
    try:
        payload = json.loads(response.text)
    except ValueError:
        problem: SchemaMismatch | None = not_json_error(
            endpoint, "server_info", redaction.scrub(response.text), response.headers.get("content-type"))
        payload = None
    else:
        problem = None
        if validate != "off":
            try:
                validate_payload(payload, "server_info", endpoint)
            except SchemaMismatch as exc:
                problem = exc
    if problem is not None and validate == "strict":
        raise problem
    if problem is not None and validate == "warn":
        warnings.warn(SchemaWarning(redaction.scrub(str(problem))), stacklevel=2)
    return payload if isinstance(payload, dict) else None
