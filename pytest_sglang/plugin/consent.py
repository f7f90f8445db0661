"""Consent: what a check may do to a server this run did not launch.

An attached server (``--sglang-url``) is someone's: flushing its prefix cache, killing or restarting
its workers, or sending it a heavy load disturbs what it serves. Such a check runs only with
``--sglang-allow-disruptive``; without it the test is skipped with the option named, or fails under
``--sglang-strict``. A server this run launched (process, docker, simulator, a fleet) needs no consent.

"Heavy" is a load of more than ``--sglang-heavy-load`` tokens, counted as requests x (input_len +
output_len) (x repeats): what the server must prefill and decode for it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pytest

from pytest_sglang.plugin.keys import SETTINGS_KEY

if TYPE_CHECKING:
    from pytest_sglang.loadgen import LoadSpec
    from pytest_sglang.server.members import Handle

__all__ = ["OPTION", "STRICT", "disruptions_of_marker", "heavy_load", "require"]

OPTION = "--sglang-allow-disruptive"
STRICT = "--sglang-strict"
HEAVY = "--sglang-heavy-load"

#: Marker keyword -> what it does to the server when true (the gates' own flushes and kills).
_FLUSHES = {
    ("sglang_fleet", "cache_aware"): "flushes every worker's prefix cache (POST /flush_cache)",
    ("sglang_hicache", "effective"): "flushes the prefix cache (POST /flush_cache) to prove evicted prefixes "
                                     "come back",
    ("sglang_hicache", "restart"): "flushes the prefix cache (POST /flush_cache: an attached server is never "
                                   "restarted) to prove the storage tier is read back",
    ("sglang_pd", "parity"): "flushes the prefix cache of every prefill and decode worker (POST /flush_cache)",
}
#: Markers that send a load. (``sglang_failover`` kills workers: it never runs against an attached fleet, with or
#: without consent, since pytest-sglang never signals processes it did not start.)
#: A soak holds a load for a duration: it always needs consent on an attached server.
_SOAK = "sglang_soak"
_LOADS = ("sglang_throughput", "sglang_slo", "sglang_fleet", "sglang_pd", "sglang_speculative", "sglang_probes")


def load_tokens(requests: int, input_len: int, output_len: int, repeats: int = 1) -> int:
    """The tokens a load makes the server process: requests x (input_len + output_len) x repeats."""
    return requests * (input_len + output_len) * repeats


def heavy_load(spec: LoadSpec, limit: int) -> str | None:
    """Why ``spec`` is heavy ("sends 1,200,000 tokens ..."), or None below ``limit``."""
    tokens = load_tokens(spec.requests, spec.input_len, spec.output_len)
    if spec.flush_cache:
        return "flushes the prefix cache (LoadSpec flush_cache=True, POST /flush_cache)"
    return _heavy_text(tokens, limit)


def _heavy_text(tokens: int, limit: int) -> str | None:
    if tokens <= limit:
        return None
    return f"sends {tokens:,} tokens of load, more than {HEAVY} {limit:,}"


def disruptions_of_marker(name: str, kwargs: Mapping[str, object], signature: inspect.Signature,
                          heavy_limit: int) -> list[str]:
    """What the marker ``name`` with ``kwargs`` would do to the server that needs consent."""
    found = [what for (marker, keyword), what in _FLUSHES.items() if marker == name and kwargs.get(keyword)]
    if name == _SOAK:  # a load held for a duration: heavy whatever its shape
        duration = {p.name: p.default for p in signature.parameters.values()}.get("duration_s")
        found.append(f"holds a load on it for duration_s={kwargs.get('duration_s', duration)} s (a soak)")
    if name in _LOADS and kwargs.get("load", True):
        values = {p.name: p.default for p in signature.parameters.values()} | dict(kwargs)
        lens = values.get("context_lens")  # sglang_speculative runs its load once per context length
        if isinstance(lens, (list, tuple)) and lens and all(isinstance(n, int) for n in lens):
            values["input_len"], values["repeats"] = max(lens), len(lens)
        # sglang_slo sends up to max_requests over its concurrency steps: count the most it may send.
        figures = [values.get("requests", values.get("max_requests")), values.get("input_len"),
                   values.get("output_len"), values.get("repeats", 1)]
        counts = [v for v in figures if isinstance(v, int)]
        text = _heavy_text(load_tokens(*counts), heavy_limit) if len(counts) == len(figures) else None
        if text is not None:
            found.append(text)
    return found


def attached(server: Handle) -> bool:
    """True when this run did not launch ``server`` (``--sglang-url``): its owner must consent."""
    return server.mode == "attach"


def require(config: pytest.Config, server: Handle, actions: list[str]) -> None:
    """Skip (or fail under ``--sglang-strict``) when ``actions`` would disturb an attached server.

    Nothing happens for a launched server, with ``--sglang-allow-disruptive``, or with no action.
    """
    __tracebackhide__ = True
    settings = config.stash.get(SETTINGS_KEY, None)
    if not actions or not attached(server) or settings is None or settings.sglang_allow_disruptive:
        return
    reason = (f"not run against the attached server {server.server_url}: this check "
              f"{'; '.join(actions)}. Fix: give {OPTION} if the server's owner agrees "
              f"(a launched server needs no consent)")
    if settings.sglang_strict:
        pytest.fail(f"{reason} ({STRICT}: a check that cannot run fails)", pytrace=False)
    pytest.skip(reason)
