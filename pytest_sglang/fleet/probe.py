"""Probe each worker a gateway lists, directly and in parallel (``--sglang-fleet-direct``).

The gateway's word is not enough: a worker it calls healthy may not answer (its health check runs
every 60 s by default, reference §1.5). So each listed worker's own ``/health`` is asked, then its
``/server_info`` validated, all workers at once. Two kinds of failure are told apart:

* *not reachable from here*: the address cannot be connected to at all (connect timeout, no route,
  unknown host), as with a cluster's pod IPs seen from CI. ``auto`` falls back to the gateway's view;
  ``require`` makes it an error.
* *dead*: the host answers but the worker does not (connection refused, read timeout, a non-200
  ``/health``). That is an error naming the worker, in every mode but ``off``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from pytest_sglang import redaction
from pytest_sglang.errors import ServerUnavailable, SGLangError
from pytest_sglang.fleet.discovery import FIX_DUPLICATE, Discovery, WorkerEntry, refuse_duplicates
from pytest_sglang.fleet.handle import WorkerHandle
from pytest_sglang.server.client import deadline_in, make_client
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.readiness import excerpt
from pytest_sglang.server.start import attach  # the engine's: /health then a validated /server_info
from pytest_sglang.server.url import mask_userinfo

__all__ = ["probe_workers", "server_fingerprint"]

#: Most workers probed at once (each probe is two short requests).
MAX_PARALLEL = 16
_CONNECT_S = 3.0
_UNREACHABLE_HINTS = ("No route to host", "Network is unreachable", "Name or service not known", "nodename",
                      "getaddrinfo", "Temporary failure in name resolution")


@dataclass(frozen=True)
class _Verdict:
    server: SGLangServer | None = None
    unreachable: str | None = None
    dead: str | None = None


def _health(entry: WorkerEntry, api_key: str | None, timeout_s: float) -> _Verdict | None:
    """None when ``/health`` is 200; otherwise why not (unreachable or dead)."""
    timeout = httpx.Timeout(max(0.5, timeout_s), connect=min(_CONNECT_S, max(0.5, timeout_s)))
    try:
        with make_client(entry.url, api_key, timeout=timeout, trust_env=False) as client:
            response = client.get("/health", extensions=deadline_in(timeout.read or _CONNECT_S))
    except httpx.ConnectTimeout:
        return _Verdict(unreachable=f"not reachable from here: no TCP connection within {timeout.connect:.0f}s")
    except httpx.ConnectError as exc:
        text = str(exc)
        if any(hint in text for hint in _UNREACHABLE_HINTS):
            return _Verdict(unreachable=f"not reachable from here: {excerpt(text, 120)}")
        return _Verdict(dead=f"GET /health -> connection refused ({excerpt(text, 120)})")
    except httpx.TimeoutException:
        return _Verdict(dead=f"GET /health -> no answer within {timeout.read:.0f}s")
    except httpx.HTTPError as exc:
        return _Verdict(dead=f"GET /health -> {type(exc).__name__}: {excerpt(str(exc), 120)}")
    if response.status_code != 200:
        body = excerpt(response.text, 80)
        return _Verdict(dead=f"GET /health -> {response.status_code}{f': {body}' if body else ''}")
    return None


def _probe_one(entry: WorkerEntry, api_key: str | None, validate: str, deadline: float) -> _Verdict:
    bad = _health(entry, api_key, deadline - time.monotonic())
    if bad is not None:
        return bad
    try:
        server = attach(entry.url, api_key=api_key, validate=validate,
                        timeout_s=max(1.0, deadline - time.monotonic()))
    except SGLangError as exc:
        return _Verdict(dead=redaction.scrub(str(exc)))
    return _Verdict(server=server)


def probe_workers(discovery: Discovery, *, api_key: str | None, validate: str, direct: str, timeout_s: float,
                  known: Mapping[str, SGLangServer] | None = None) -> list[WorkerHandle]:
    """One handle per listed worker, probed directly per ``direct``; raise naming every dead worker.

    ``known``: handles of workers this run launched, by URL (they are not probed again).
    """
    known = known or {}
    refuse_duplicates(discovery)
    deadline = time.monotonic() + timeout_s
    entries = list(discovery.workers)
    verdicts: dict[int, _Verdict] = {}
    todo = [(i, e) for i, e in enumerate(entries) if e.url not in known]
    for i, entry in enumerate(entries):
        if entry.url in known:
            verdicts[i] = _Verdict(server=known[entry.url])
        elif direct == "off":
            verdicts[i] = _Verdict(unreachable="direct probing off (--sglang-fleet-direct off)")
        elif not entry.is_healthy:
            verdicts[i] = _Verdict(unreachable="unhealthy according to the gateway; not probed")
    todo = [(i, e) for i, e in todo if i not in verdicts]
    if todo:
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(todo)), thread_name_prefix="sglang-fleet") as pool:
            futures = {i: pool.submit(_probe_one, e, api_key, validate, deadline) for i, e in todo}
            verdicts.update({i: f.result() for i, f in futures.items()})
    handles = [WorkerHandle(i, e, server=verdicts[i].server, unreachable=verdicts[i].unreachable)
               for i, e in enumerate(entries)]
    _refuse_same_server(handles)
    problems = [f"  {h.name()}: the gateway calls it healthy but {verdicts[h.index].dead}"
                for h in handles if verdicts[h.index].dead]
    if direct == "require":
        problems += [f"  {h.name()}: {h.unreachable} (--sglang-fleet-direct require)"
                     for h in handles if h.unreachable and h.entry.is_healthy]
    if problems:
        raise ServerUnavailable(redaction.scrub(
            f"{len(problems)} of {len(handles)} worker(s) behind the gateway failed the direct probe:\n"
            + "\n".join(problems) + "\nFix: restart or remove the worker(s) named above (the gateway's health check "
            "has not noticed yet), or run with --sglang-fleet-direct off to judge by the gateway alone."))
    return handles


def server_fingerprint(info: Mapping[str, object] | None) -> str | None:
    """What tells one SGLang process from another in its ``/server_info``, or None when too little is known.

    SGLang serves no pid; but ``random_seed`` is drawn at each start unless given, and ``startup_time``
    holds the durations the process measured while it loaded (floats no second process repeats), next
    to the ``port`` it listens on. Two URLs with equal fingerprints reach one server.
    """
    if info is None:
        return None
    port, seed, startup = info.get("port"), info.get("random_seed"), info.get("startup_time")
    if not isinstance(port, int) or not isinstance(seed, int) or not startup:
        return None
    return json.dumps([port, seed, startup], sort_keys=True)


def _refuse_same_server(handles: list[WorkerHandle]) -> None:
    seen: dict[str, WorkerHandle] = {}
    pairs: list[str] = []
    for handle in handles:
        info = handle.server.initial_info if handle.server is not None else None
        mark = server_fingerprint(info)
        if mark is None:
            continue
        if mark in seen:
            pairs.append(f"  {mask_userinfo(seen[mark].url)} and {mask_userinfo(handle.url)} answer with the same "
                         f"server's /server_info (port, random_seed and startup_time alike)")
        else:
            seen[mark] = handle
    if pairs:
        raise ServerUnavailable(redaction.scrub(
            f"the gateway lists {len(pairs)} worker(s) twice under different URLs:\n" + "\n".join(pairs)
            + "\n" + FIX_DUPLICATE))
