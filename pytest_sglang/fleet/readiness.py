"""Wait until a gateway can serve: ONE tenacity loop, ONE deadline, fail fast when the gateway dies.

A gateway's ``/health`` answers 200 even with no healthy worker (reference §1.3), so it is no
readiness signal. Ready means ``GET /readiness`` 200, at least ``min_workers`` workers healthy in
``GET /workers`` (default: every listed one; for a launch: every launched one, each listed by its URL).
The loop polls every 0.1 s, so the fixture returns within a moment of the gateway turning ready. It is the
server's loop (:mod:`pytest_sglang.server.poll`: one deadline, the attach grace); what differs is the probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import httpx
from tenacity import RetryError, wait_fixed

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError, ServerExited, ServerNotReady, ServerUnavailable
from pytest_sglang.fleet.discovery import Discovery, Readiness, parse_readiness, parse_workers, refuse_duplicates
from pytest_sglang.server.base import RunningProcess
from pytest_sglang.server.client import deadline_in, make_client
from pytest_sglang.server.phases import log_tail
from pytest_sglang.server.poll import poll
from pytest_sglang.server.probe import NotReadyYet
from pytest_sglang.server.progress import format_duration
from pytest_sglang.server.readiness import excerpt
from pytest_sglang.server.url import ServerURL

__all__ = ["GatewayTarget", "gateway_client_key", "wait_gateway_ready"]

POLL_S = 0.1
#: How often a waiting launch says what the gateway still lacks.
HEARTBEAT_S = 15.0
_CONNECT_S = 2.0
_READ_S = 10.0
#: smg 1.x and sglang-router 0.3.x: the key the gateway demands from its clients (and sends its workers).
_KEY_FLAG = "--api-key"
#: smg: per-tenant keys for the serving path; GET /workers does not take them (smg 1.13.0 answers 401).
_TENANT_FLAG = "--tenant-api-key"


def _flag_values(args: Sequence[str], flag: str) -> list[str]:
    out = []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith(flag + "="):
            out.append(arg.split("=", 1)[1])
    return out


def gateway_client_key(gateway_args: Sequence[str], run_key: str | None) -> tuple[str | None, str]:
    """(the key to send a launched gateway, where it comes from): its own ``--api-key``, else the run's key.

    With ``--api-key K`` a gateway answers 401 to every client that does not send K; the plugin sends it
    the way it sends workers their key (``Authorization: Bearer``).
    """
    for tenant in _flag_values(gateway_args, _TENANT_FLAG):
        redaction.register(tenant, tenant.partition(":")[2])  # TENANT_ID:KEY
    given = _flag_values(gateway_args, _KEY_FLAG)
    if given:
        redaction.register(given[-1])  # argparse: the last one wins
        return given[-1], f"{_KEY_FLAG} in --sglang-gateway"
    return run_key, "--sglang-api-key" if run_key else ""


@dataclass
class GatewayTarget:
    """What is waited for: the gateway, its process when launched, and the workers it must show."""

    url: ServerURL
    mode: str  # "attach" or the runner of a launched fleet
    api_key: str | None = None
    process: RunningProcess | None = None
    #: Healthy workers needed; None = every listed worker (at least one).
    min_workers: int | None = None
    #: Launch: the URLs that must be listed and healthy.
    expect_urls: Collection[str] = ()
    #: Where ``api_key`` comes from, for messages (``--api-key in --sglang-gateway``); "" when none is sent.
    key_source: str = ""
    #: Launch: the gateway's own arguments (to name its auth flags when it refuses us).
    gateway_args: Sequence[str] = ()

    def exited(self) -> bool:
        """True when the launched gateway process has ended."""
        return self.process is not None and self.process.exit_status() is not None


class _Refused(Exception):
    """401/403: waiting does not change a key; the wait ends at once."""


@dataclass
class _Seen:
    deadline: float
    readiness: Readiness | None = None
    discovery: Discovery | None = None
    problem: str = "no answer yet"
    #: Since when the gateway does not answer at all (attach gives up after the grace).
    trouble_since: float | None = None
    final: bool = False


def wait_gateway_ready(target: GatewayTarget, deadline_s: float, *, started: float | None = None,
                       say: Callable[[str], None] | None = None) -> Discovery:
    """Poll ``/readiness`` and ``/workers`` until the fleet is ready; the workers as the gateway lists them.

    ``say`` hears what is still missing every :data:`HEARTBEAT_S` (a long wait is never silent).
    """
    t0 = time.monotonic() if started is None else started
    seen = _Seen(deadline=t0 + deadline_s)
    timeout = httpx.Timeout(_READ_S, connect=_CONNECT_S)
    with make_client(target.url, target.api_key, timeout=timeout, trust_env=False) as client:
        last_said = time.monotonic()

        def probe() -> Discovery:
            nonlocal last_said
            if say is not None and time.monotonic() - last_said >= HEARTBEAT_S:
                last_said = time.monotonic()
                say(f"waiting for the gateway ({format_duration(last_said - t0)}): {seen.problem}")
            return _probe(client, target, seen)

        try:
            return poll(probe, seen, exited=target.exited, attach=target.mode == "attach", wait=wait_fixed(POLL_S))
        except RetryError:
            pass
        except _Refused as exc:
            raise _refused(target, str(exc)) from None
    raise _failure(target, seen, time.monotonic() - t0)


def _probe(client: httpx.Client, target: GatewayTarget, seen: _Seen) -> Discovery:
    try:
        answer = client.get("/readiness", extensions=deadline_in(_READ_S))
        workers = client.get("/workers", extensions=deadline_in(_READ_S))
    except httpx.TransportError as exc:
        seen.problem = f"the gateway does not answer: {type(exc).__name__}: {excerpt(str(exc), 120)}"
        if seen.trouble_since is None:
            seen.trouble_since = time.monotonic()
        raise NotReadyYet(seen.problem) from None
    seen.trouble_since = None
    for path, response in (("/readiness", answer), ("/workers", workers)):
        if response.status_code in (401, 403):
            raise _Refused(f"GET {path} -> {response.status_code}: {excerpt(response.text, 160)}")
    ready = seen.readiness = parse_readiness(answer)
    found = parse_workers(_json(workers)) if workers.status_code == 200 else None
    if found is None:
        seen.problem = f"GET /workers -> {workers.status_code}: not a worker list"
        raise NotReadyYet(seen.problem)
    seen.discovery = found
    refuse_duplicates(found)  # not a state that passes: fail at once, naming both spellings
    problem = _unmet(target, ready, found)
    if problem is not None:
        seen.problem = problem
        raise NotReadyYet(problem)
    return found


def _json(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def _unmet(target: GatewayTarget, ready: Readiness, found: Discovery) -> str | None:
    """Why the fleet is not ready yet, or None when it is."""
    if not ready.ready:
        return ready.describe()
    listed = {w.url for w in found.workers}
    missing = [u for u in target.expect_urls if u not in listed]
    if missing:
        return f"the gateway has not registered {', '.join(missing)} yet"
    # Default: every listed (for a launch, every launched) worker healthy; --sglang-min-workers lowers it.
    # Counted by endpoint: one worker the gateway lists under two spellings is one worker.
    distinct = len({w.key for w in found.workers})
    need = target.min_workers if target.min_workers is not None else max(1, distinct)
    healthy = found.distinct_healthy()
    if healthy < need:
        which = "" if target.min_workers is None else " (--sglang-min-workers)"
        return f"{healthy} of {distinct} workers healthy, {need} needed{which}"
    return None


def _failure(target: GatewayTarget, seen: _Seen, elapsed_s: float) -> Exception:
    lines = [f"gateway {target.url} (mode={target.mode}) not ready after {format_duration(elapsed_s)}: {seen.problem}"]
    if seen.readiness is not None:
        lines.append(f"Last readiness: {seen.readiness.describe()}")
    if seen.discovery is not None:
        lines += ["Workers as the gateway lists them:"] + [
            f"  {w.role} {w.url} {'healthy' if w.is_healthy else 'UNHEALTHY'}" for w in seen.discovery.workers]
    if target.process is not None:
        tail = log_tail(target.process.log_path, 20)
        if tail:
            lines += [f"Gateway log ({target.process.log_path}), last lines:"] + [f"  {line}" for line in tail]
    if target.exited():
        assert target.process is not None
        status = target.process.exit_status()
        lines[0] = (f"gateway {target.url} {status.describe() if status else 'exited'} before the fleet was ready "
                    f"({format_duration(elapsed_s)})")
        lines.append("Fix: read the gateway log above (a bad --sglang-gateway argument?).")
        return ServerExited(redaction.scrub("\n".join(lines)))
    if target.mode == "attach":
        lines.append("Fix: check the workers behind the gateway (their /health and logs), or lower "
                     "--sglang-min-workers if fewer healthy workers are acceptable.")
        return ServerUnavailable(redaction.scrub("\n".join(lines)))
    lines.append("Fix: read the gateway log; raise --sglang-startup-timeout if the workers need longer.")
    return ServerNotReady(redaction.scrub("\n".join(lines)))


def _masked(args: Sequence[str]) -> list[str]:
    """The gateway's args with the values of its key flags masked (whatever else the redaction registry knows)."""
    out: list[str] = []
    for arg in args:
        flag = arg.split("=", 1)[0]
        if out and out[-1] in (_KEY_FLAG, _TENANT_FLAG):
            out.append(redaction.MASK)
        elif flag in (_KEY_FLAG, _TENANT_FLAG) and "=" in arg:
            out.append(f"{flag}={redaction.MASK}")
        else:
            out.append(redaction.scrub(arg))
    return out


def _refused(target: GatewayTarget, detail: str) -> Exception:
    """The gateway refuses our key (or its absence): say which key was sent, masked, and which one it wants."""
    sent = (f"pytest-sglang sent the key of {target.key_source} (Authorization: Bearer {redaction.MASK})"
            if target.api_key else "pytest-sglang sent no key")
    flags = [f for f in (_KEY_FLAG, _TENANT_FLAG) if _flag_values(target.gateway_args, f)]
    started = (f"; the gateway was started with {' and '.join(f'{f} {redaction.MASK}' for f in flags)}"
               if flags else "")
    problem = redaction.scrub(f"gateway {target.url} refused pytest-sglang's requests: {detail}; {sent}{started}")
    if target.mode == "attach":
        return ServerUnavailable(f"{problem}\nFix: pass the gateway's API key with --sglang-api-key (or "
                                 "SGLANG_API_KEY).")
    tenant = (f" ({_TENANT_FLAG} keys open the serving path only, not GET /workers)"
              if _TENANT_FLAG in flags else "")
    return ConfigError("--sglang-gateway", " ".join(_masked(target.gateway_args)), problem,
                       f"give the gateway its client key as {_KEY_FLAG} K in --sglang-gateway (pytest-sglang sends "
                       f"it to the gateway), or set --sglang-api-key{tenant}")
