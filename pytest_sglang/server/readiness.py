"""Wait until a server is ready: ONE tenacity loop, ONE deadline, fail fast when the process dies.

Ready means: ``GET /health`` answers 200 (judged by status code only: SGLang's body is empty), then
``/server_info`` (``/get_server_info`` on 404, older SGLang) parses and validates, and, for a
launch, the server answering is the launched one (:mod:`.identity`). The /health probe may run a
one-token generation (up to ~20 s on a busy server), hence its long timeout; every request's
timeouts are clipped to the time left, so no probe outlives the deadline.

Polling starts at 50 ms and backs off gently to 0.5 s while the port is closed; once the server
answers HTTP (warmup, 503) it polls every 0.1 s, so the 503 -> 200 flip is seen quickly. Sleeps are
sliced: process death and new log phases are noticed within ~50 ms. Attach mode gives up at once on
answers that waiting cannot fix (a 404, a redirect, TLS on a plain-http port) and after a short
grace on those that rarely fix themselves (refused, closed, 5xx). The loop itself is :mod:`.poll`'s, shared
with the gateway's readiness. Tenacity's RetryError never
reaches the user: it becomes ServerExited / ServerNotReady / ServerUnavailable with the phase
reached, the last probe, the log tail and the fix (:mod:`.diagnosis`).
"""

from __future__ import annotations

import json
import ssl
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import httpx
from tenacity import RetryCallState, RetryError
from tenacity.wait import wait_base

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError, SchemaMismatch
from pytest_sglang.jsontypes import JSONObject
from pytest_sglang.server import diagnosis, identity
from pytest_sglang.server.client import DEADLINE, make_client
from pytest_sglang.server.poll import poll
from pytest_sglang.server.probe import HEALTH_PROBE_TIMEOUT_S, NotReadyYet, Probe, Target, WaitState
from pytest_sglang.server.validation import SchemaWarning, not_json_error, prepare, validate_payload

__all__ = ["HEALTH_PROBE_TIMEOUT_S", "ReadyResult", "Target", "check_info", "wait_until_ready"]

CONNECT_TIMEOUT_S = 2.0
MIN_PROBE_TIMEOUT_S = 0.25
FIRST_POLL_S = 0.05
MAX_POLL_S = 0.5
ANSWERING_POLL_S = 0.1
SLICE_S = 0.05
#: Answers that waiting cannot fix: attach gives up at once (/health is exempt from SGLang's auth,
#: so a 401/403 there comes from a proxy; 404/405/400 mean the URL is not an SGLang server).
_FINAL_HEALTH_STATUS = (400, 401, 403, 404, 405)
_EXCERPT = 200


@dataclass
class ReadyResult:
    info: JSONObject | None
    info_endpoint: str
    probes: int
    elapsed_s: float


class _poll_wait(wait_base):
    """50 ms growing by 1.5x to 0.5 s; 0.1 s once the server answers HTTP (warming up)."""

    def __init__(self, state: WaitState) -> None:
        self.state = state

    def __call__(self, retry_state: RetryCallState) -> float:
        cap = ANSWERING_POLL_S if self.state.answered else MAX_POLL_S
        wait = min(cap, FIRST_POLL_S * 1.5 ** min(retry_state.attempt_number - 1, 40))  # no float overflow
        return max(0.0, min(wait, self.state.left_s))


def _watchful_sleep(target: Target) -> Callable[[float], None]:
    """A sleep that returns early when the process exits or the log announces the HTTP server.

    Its first slice compiles the ``/server_info`` schema (unless validation is off): work that would
    otherwise follow the first ``/health`` 200, done while the server is still starting.
    """
    prepared = target.validate == "off"

    def sleep(seconds: float) -> None:
        nonlocal prepared
        end = time.monotonic() + seconds
        if not prepared:
            prepared = True
            prepare("server_info")
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
    # No proxy from the environment: probes go to the server itself (as SGLang's own tests do).
    with make_client(target.url, target.api_key, trust_env=False) as client:
        try:
            info, endpoint = poll(lambda: _probe(client, target, state), state, exited=target.exited,
                                  attach=target.mode == "attach", wait=_poll_wait(state),
                                  sleep=_watchful_sleep(target))
        except RetryError:
            raise diagnosis.start_failure(target, state) from None
    _confirm_launched(target, state, info)
    return ReadyResult(info, endpoint, state.probes, state.elapsed_s)


def _confirm_launched(target: Target, state: WaitState, info: JSONObject | None) -> None:
    """A launch is ready only if its process lives and the server answering is the launched one."""
    if target.process is None:
        return
    problem = identity.mismatch(target, info)
    if target.exited():  # e.g. it lost the bind race and died while another server answered
        raise diagnosis.start_failure(target, state)
    if problem is not None:
        raise diagnosis.wrong_server_error(target, state, problem)


def _probe(client: httpx.Client, target: Target, state: WaitState) -> tuple[JSONObject | None, str]:
    state.probes += 1
    response = _get(client, "/health", state, target.health_timeout_s)
    if response.status_code != 200:
        _not_ready(state, _status_probe("/health", response), final=response.status_code in _FINAL_HEALTH_STATUS
                   or response.is_redirect, trouble=response.status_code != 503)
    state.health_ok = True
    return fetch_info(client, target, state)


def _not_ready(state: WaitState, probe: Probe, *, final: bool = False, trouble: bool = True) -> NoReturn:
    """Record ``probe`` and end this attempt (NotReadyYet): retried, or attach gives up."""
    state.last, state.final = probe, final
    if not trouble:
        state.trouble_since = None
    elif state.trouble_since is None:
        state.trouble_since = time.monotonic()
    raise NotReadyYet(probe.describe())


def _status_probe(path: str, response: httpx.Response) -> Probe:
    location = None
    if response.is_redirect and "location" in response.headers:
        location = str(response.url.join(response.headers["location"]))
    detail = "" if response.status_code == 503 or location else excerpt(response.text)
    return Probe(path, "status", response.status_code, detail=detail, location=location)


def excerpt(text: str, limit: int = _EXCERPT) -> str:
    """A short, single-line, clean and scrubbed rendering of server-provided text."""
    flat = " ".join(redaction.clean_text(text).split())
    flat = flat if len(flat) <= limit else flat[: limit - 3] + "..."
    return redaction.scrub(flat)


def _timeout(state: WaitState, cap: float) -> httpx.Timeout:
    # Never wait on one request past the deadline (by more than a moment).
    left = max(MIN_PROBE_TIMEOUT_S, state.left_s)
    return httpx.Timeout(min(cap, left), connect=min(CONNECT_TIMEOUT_S, left))


def _get(client: httpx.Client, path: str, state: WaitState, cap: float) -> httpx.Response:
    timeout = _timeout(state, cap)
    try:
        response = client.get(path, timeout=timeout,
                              extensions={DEADLINE: time.monotonic() + max(MIN_PROBE_TIMEOUT_S, state.left_s)})
    except httpx.TimeoutException:
        _not_ready(state, Probe(path, "timeout", timeout_s=timeout.read), trouble=False)
    except httpx.TransportError as exc:
        kind, final = _classify(exc)
        detail = excerpt(str(exc)) if kind != "refused" else ""
        _not_ready(state, Probe(path, kind, detail=detail or excerpt(type(exc).__name__)), final=final)
    state.answered = True
    return response


def _classify(exc: httpx.TransportError) -> tuple[str, bool]:
    """The probe kind of a transport failure, and whether waiting cannot fix it (attach gives up)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return "tls", True
        if isinstance(cause, ConnectionRefusedError):
            return "refused", False
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if "SSL" in text or "TLS" in text:
        return "tls", True
    if isinstance(exc, httpx.ConnectError) and ("Name or service not known" in text or "nodename" in text
                                                or "getaddrinfo" in text or "Temporary failure" in text):
        return "dns", True
    if isinstance(exc, httpx.ConnectError):
        return "refused", False
    if isinstance(exc, httpx.RemoteProtocolError) and "without sending" in text:
        return "closed", False
    return "transport", False


def fetch_info(client: httpx.Client, target: Target, state: WaitState) -> tuple[JSONObject | None, str]:
    """``/server_info`` (or ``/get_server_info`` on 404), parsed and validated per ``target.validate``."""
    endpoint = "/server_info"
    response = _get(client, endpoint, state, target.health_timeout_s)
    if response.status_code == 404:
        endpoint = "/get_server_info"
        response = _get(client, endpoint, state, target.health_timeout_s)
    if response.status_code in (401, 403):
        refused = "refused the key" if target.api_key else "needs a key and none was given"
        raise ConfigError("--sglang-api-key", redaction.MASK if target.api_key else "(not set)",
                          f"GET {endpoint} at {target.url} answered {response.status_code} "
                          f"{excerpt(response.text, 80)}: the server {refused}",
                          "pass the server's --api-key as --sglang-api-key (ini sglang_api_key, env "
                          "PYTEST_SGLANG_API_KEY or SGLANG_API_KEY)")
    if response.status_code != 200:
        # 404 here means neither endpoint exists: not SGLang (or a router hiding them); waiting won't help.
        _not_ready(state, _status_probe(endpoint, response),
                   final=response.is_redirect or response.status_code == 404)
    state.last, state.trouble_since = Probe(endpoint, "status", 200), None
    return check_info(response, endpoint, target.validate), endpoint


def check_info(response: httpx.Response, endpoint: str, validate: str) -> JSONObject | None:
    """Parse and validate a server_info response; strict raises, warn warns, off only parses."""
    try:
        payload = json.loads(response.text)
    except ValueError:
        problem: SchemaMismatch | None = not_json_error(
            endpoint, "server_info", excerpt(response.text), response.headers.get("content-type"))
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
