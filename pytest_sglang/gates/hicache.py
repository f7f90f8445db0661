"""Hierarchical-cache gate: ``@pytest.mark.sglang_hicache(...)`` and :func:`assert_hicache`.

Configuration comes from ``/server_info`` (top-level resolved args, reference §2.2). The host pool
actually allocated comes from the ``sglang:hicache_host_total_tokens`` gauge when metrics are on, or
from the startup log's ``Allocating ... hierarchical KV host pool`` lines when the plugin launched the
server; each check names its source, and when neither exists the message says what to enable.
``effective=True`` proves the cache works (:mod:`pytest_sglang.loadgen.prefix_reuse`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang.errors import ConfigError, SGLangError
from pytest_sglang.gates.base import Check, GateOutcome, compare, fmt
from pytest_sglang.gates.capacity import token_capacity
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen.prefix_reuse import ReuseResult, run_prefix_reuse
from pytest_sglang.sglang.hostmem import GB, GiB

GATE = "hicache"
_ENABLE = ("launch through the plugin (startup-log host pool lines) or add --enable-metrics "
           "(the sglang:hicache_host_total_tokens gauge)")
_SIZE_FIX = ("raise --hicache-size (decimal GB per rank) or --hicache-ratio (host/device tokens); check "
             "the host fits first: python -m pytest_sglang plan -- <launch args>")
_CONFIG = {  # keyword -> (/server_info field, SGLang flag)
    "write_policy": ("hicache_write_policy", "--hicache-write-policy"),
    "io_backend": ("hicache_io_backend", "--hicache-io-backend"),
    "mem_layout": ("hicache_mem_layout", "--hicache-mem-layout"),
    "storage_backend": ("hicache_storage_backend", "--hicache-storage-backend"),
}


@dataclass(frozen=True)
class HostPools:
    """The host pool per rank as measured, with where the figures came from."""

    tokens: tuple[int, ...] = ()
    gb: tuple[float, ...] = ()
    source: str = ""
    gb_source: str = ""
    #: Ranks that logged a pool (None when no startup log was read).
    logged_ranks: int | None = None


def _metric_tokens(server: Any) -> tuple[int, ...]:
    try:
        samples = server.metrics().get("sglang:hicache_host_total_tokens", [])
    except (SGLangError, AttributeError):
        return ()  # metrics off (404), or a handle without metrics
    return tuple(int(s.value) for s in samples)


def _log_pools(server: Any) -> list[Any]:
    pools = list(getattr(getattr(server, "startup", None), "host_pools", None) or [])
    return [p for p in pools if getattr(p, "pool", "kv") == "kv"]


def _device_bytes_per_token(info: Mapping[str, Any]) -> float | None:
    states = info.get("internal_states") or [{}]
    usage = (states[0].get("memory_usage") or {}) if isinstance(states[0], Mapping) else {}
    kv, cap = usage.get("kvcache"), usage.get("token_capacity")
    if isinstance(kv, (int, float)) and isinstance(cap, int) and kv > 0 and cap > 0:
        return kv * GiB / cap
    return None


def host_pools(server: Any, info: Mapping[str, Any]) -> HostPools:
    """Measured host pools: the metric gauge first, then the startup log."""
    logged = _log_pools(server)
    log_gb = tuple(float(p.gb) for p in logged)
    log_src = f"startup log: {len(logged)} 'Allocating kv hierarchical KV host pool' line(s)"
    ranks = len(logged) if logged else None
    tokens = _metric_tokens(server)
    source = "/metrics sglang:hicache_host_total_tokens"
    if not tokens and logged and all(p.tokens is not None for p in logged):
        tokens, source = tuple(int(p.tokens) for p in logged), log_src
    if not tokens:
        return HostPools(gb=log_gb, source=f"not available: {_ENABLE}", gb_source=log_src if logged else "",
                         logged_ranks=ranks)
    if log_gb:
        return HostPools(tokens, log_gb, source, log_src, ranks)
    per_token = _device_bytes_per_token(info)
    if per_token is None:
        return HostPools(tokens, (), source, f"not available: {_ENABLE}")
    return HostPools(tokens, tuple(t * per_token / GB for t in tokens), source,
                     f"{source} x device KV bytes per token (internal_states[0].memory_usage.kvcache / "
                     "token_capacity)")


def _int(info: Mapping[str, Any], key: str) -> int:
    value = info.get(key)
    return value if isinstance(value, int) and value > 0 else 1


def _expected_ranks(info: Mapping[str, Any]) -> int:
    ranks = _int(info, "tp_size") * _int(info, "pp_size") * _int(info, "dp_size")
    return max(1, ranks // _int(info, "nnodes"))


def _config_checks(out: GateOutcome, info: Mapping[str, Any], enabled: bool,
                   wanted: Mapping[str, str]) -> None:
    fix = ("add --enable-hierarchical-cache (and --hicache-size N, GB per rank) to the launch args"
           if enabled else "remove --enable-hierarchical-cache from the launch args")
    out.add(compare(GATE, "enable_hierarchical_cache", info.get("enable_hierarchical_cache"), "==", enabled,
                    source="/server_info enable_hierarchical_cache", remedy=fix))
    for key, value in wanted.items():
        field, flag = _CONFIG[key]
        note = (" (SGLang rewrites page_first with --hicache-io-backend direct to page_first_direct)"
                if key == "mem_layout" else "")
        out.add(compare(GATE, field, info.get(field), "==", value, source=f"/server_info {field}",
                        remedy=f"launch with {flag} {value}{note}"))


def _size_checks(out: GateOutcome, pools: HostPools, info: Mapping[str, Any], min_host_tokens: int | None,
                 min_host_gb_per_rank: float | None, min_ratio: float | None) -> None:
    least = min(pools.tokens) if pools.tokens else None
    if min_host_tokens is not None:
        out.add(compare(GATE, "host_pool_tokens", least, ">=", min_host_tokens, unit="tokens",
                        source=pools.source, remedy=_SIZE_FIX))
    if min_host_gb_per_rank is not None:
        gb = round(min(pools.gb), 2) if pools.gb else None
        out.add(compare(GATE, "host_pool_gb_per_rank", gb, ">=", min_host_gb_per_rank, unit="GB",
                        source=pools.gb_source or f"not available: {_ENABLE}", remedy=_SIZE_FIX))
    if min_ratio is not None:
        device = token_capacity(info)
        ratio = None if least is None or not device.least else round(least / device.least, 3)
        out.add(compare(GATE, "host_device_ratio", ratio, ">=", min_ratio,
                        source=f"{pools.source} / {device.source}", remedy=_SIZE_FIX))


def _validate(**kw: Any) -> None:
    for name in ("min_host_tokens", "min_host_gb_per_rank", "min_ratio", "min_gain"):
        value = kw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value <= 0):
            raise ConfigError(f"sglang_hicache({name}=...)", value, "must be a number > 0",
                              f"give {name} as a positive number, e.g. {name}=2")
    for name in _CONFIG:
        value = kw.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"sglang_hicache({name}=...)", value, "must be a string",
                              f"give the value as SGLang spells it in /server_info {_CONFIG[name][0]}")


def evaluate_hicache(
    server: Any, *, enabled: bool = True, min_host_tokens: int | None = None,
    min_host_gb_per_rank: float | None = None, min_ratio: float | None = None,
    write_policy: str | None = None, io_backend: str | None = None, mem_layout: str | None = None,
    storage_backend: str | None = None,
) -> GateOutcome:
    """Check the hierarchical cache of ``server`` (an :class:`~pytest_sglang.server.SGLangServer`)."""
    wanted = {k: v for k, v in (("write_policy", write_policy), ("io_backend", io_backend),
                                ("mem_layout", mem_layout), ("storage_backend", storage_backend))
              if v is not None}
    _validate(min_host_tokens=min_host_tokens, min_host_gb_per_rank=min_host_gb_per_rank,
              min_ratio=min_ratio, **wanted)
    info = server.info()
    out = GateOutcome(GATE)
    _config_checks(out, info, enabled, wanted)
    if not enabled:
        return out
    pools = host_pools(server, info)
    if pools.logged_ranks is not None:
        out.add(compare(GATE, "host_pools", pools.logged_ranks, "==", _expected_ranks(info), unit="pools",
                        source=pools.gb_source or pools.source,
                        remedy="every rank (tp x pp x dp) allocates its own pool: read the server log"))
    _size_checks(out, pools, info, min_host_tokens, min_host_gb_per_rank, min_ratio)
    if pools.gb:
        out.context["host pools"] = (f"{len(pools.gb)} x {fmt(round(min(pools.gb), 2))} GB = "
                                     f"{fmt(round(sum(pools.gb), 1))} GB of host memory")
    out.context["configured"] = (f"hicache_size={info.get('hicache_size')} (GB per rank, 0 = ratio), "
                                 f"hicache_ratio={info.get('hicache_ratio')}")
    return out


def assert_hicache(server: Any, **kwargs: Any) -> GateOutcome:
    """:func:`evaluate_hicache`, raising ``AssertionError(outcome.message())`` on a miss."""
    __tracebackhide__ = True
    outcome = evaluate_hicache(server, **kwargs)
    outcome.raise_for_failures()
    return outcome


def effective_checks(result: ReuseResult, min_gain: float | None) -> list[Check]:
    """Host-tier hits on the second pass (and the gain, when asked)."""
    spilled = max(1, (result.working_set - result.device_tokens) // 2)
    fix = ("the host tier did not serve the evicted prefixes: check --enable-hierarchical-cache, "
           f"--hicache-write-policy and the host pool size ({_SIZE_FIX})")
    hits = result.second.host_cached_tokens
    source = "second pass: sum of meta_info.cached_tokens_details.host"
    if not result.second.details_seen and result.load_back_tokens is not None:
        hits, source = result.load_back_tokens, "second pass: growth of sglang:load_back_tokens_total"
    elif result.load_back_tokens is not None:
        source += f" (sglang:load_back_tokens_total grew by {fmt(result.load_back_tokens)})"
    checks = [compare(GATE, "host_hit_tokens", hits, ">=", spilled, unit="tokens", remedy=fix,
                      detail=result.shape(),
                      source=f"{source}; required: half of the working set that cannot stay on the GPU")]
    if min_gain is not None:
        checks.append(compare(GATE, "repeat_gain", round(result.gain, 2), ">=", min_gain, unit="x",
                              remedy=fix, detail=result.shape(),
                              source=f"first pass {result.first.seconds:.3f} s / second pass "
                                     f"{result.second.seconds:.3f} s (wall time)"))
    return checks


def _host_tokens_for_workload(server: Any, info: Mapping[str, Any]) -> int | None:
    pools = host_pools(server, info)
    if pools.tokens:
        return min(pools.tokens)
    per_token, device = _device_bytes_per_token(info), token_capacity(info).least
    size, ratio = info.get("hicache_size"), info.get("hicache_ratio")
    if isinstance(size, int) and size > 0 and per_token:
        return int(size * GB / per_token)
    return int(device * ratio) if isinstance(ratio, (int, float)) and device else None


def _load_lock(ctx: GateContext) -> contextlib.AbstractContextManager[None]:
    """The plugin's run-wide load lock (``ctx.load.lock()``), so that no other load overlaps this
    workload; none when ``ctx.load`` is a plain callable (the gate used without the plugin)."""
    lock = getattr(ctx.load, "lock", None)
    if not callable(lock):
        return contextlib.nullcontext()
    held: contextlib.AbstractContextManager[None] = lock()
    return held


def _unmeasured(reason: str, remedy: str) -> Check:
    return compare(GATE, "host_hit_tokens", None, ">=", 1, source=reason, remedy=remedy)


def _run_effective(ctx: GateContext, outcome: GateOutcome, min_gain: float | None) -> None:
    info = ctx.server.info()
    if info.get("enable_hierarchical_cache") is not True:
        outcome.add(_unmeasured("workload not run: /server_info enable_hierarchical_cache is not true",
                                "add --enable-hierarchical-cache to the launch args"))
        return
    device, host = token_capacity(info).least, _host_tokens_for_workload(ctx.server, info)
    max_input = info.get("max_req_input_len")
    if device is None or host is None or not isinstance(max_input, int):
        outcome.add(_unmeasured(f"workload not sized: {_ENABLE}", "make the host pool size visible"))
        return
    try:
        with _load_lock(ctx):
            result = run_prefix_reuse(ctx.server, device_tokens=device, host_tokens=host, max_input=max_input)
    except ValueError as exc:
        outcome.add(_unmeasured(f"workload not possible: {exc}", _SIZE_FIX))
        return
    for check in effective_checks(result, min_gain):
        outcome.add(check)
    outcome.context["reuse workload"] = result.shape()


def run_marker(
    ctx: GateContext, *, enabled: bool = True, min_host_tokens: int | None = None,
    min_host_gb_per_rank: float | None = None, min_ratio: float | None = None,
    write_policy: str | None = None, io_backend: str | None = None, mem_layout: str | None = None,
    storage_backend: str | None = None, effective: bool = False, min_gain: float | None = None,
) -> GateOutcome:
    """The ``sglang_hicache`` marker: configuration and pool checks, then the workload if ``effective``."""
    if min_gain is not None and not effective:
        raise ConfigError("sglang_hicache(min_gain=...)", min_gain, "only applies with effective=True",
                          "add effective=True, or drop min_gain")
    if effective and not enabled:
        raise ConfigError("sglang_hicache(effective=True)", True, "contradicts enabled=False",
                          "use effective=True with enabled=True")
    _validate(min_gain=min_gain)
    outcome = evaluate_hicache(
        ctx.server, enabled=enabled, min_host_tokens=min_host_tokens,
        min_host_gb_per_rank=min_host_gb_per_rank, min_ratio=min_ratio, write_policy=write_policy,
        io_backend=io_backend, mem_layout=mem_layout, storage_backend=storage_backend)
    if effective:
        _run_effective(ctx, outcome, min_gain)
    return outcome
