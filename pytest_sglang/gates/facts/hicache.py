"""Hierarchical-cache gate: ``@pytest.mark.sglang_hicache(...)`` and :func:`assert_hicache`.

Configuration comes from ``/server_info`` (top-level resolved args, reference §2.2). The host pool
actually allocated comes from the ``sglang:hicache_host_total_tokens`` gauge when metrics are on, or
from the startup log's ``Allocating ... hierarchical KV host pool`` lines when the plugin launched the
server; each check names its source, and when neither exists the message says what to enable.
``effective=True`` proves the cache works (:mod:`pytest_sglang.loadgen.workloads.prefix_reuse`).

The loop over the handle's members (``evaluate_fleet_hicache``: a lone server is its own one member, a
fleet's workers each) is at the end of this module, not in one of its own: the marker and the assert
helper call it, and it calls the single-server evaluation, so a module of its own made a circle (issue
31). Hence ~430 lines; shared per-member helpers: gates/facts/workers.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypedDict, runtime_checkable

from pytest_sglang.errors import SGLangError
from pytest_sglang.formatting import fmt
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.facts.capacity import token_capacity
from pytest_sglang.gates.facts.workers import for_worker, merge_context, no_workers, not_checked, unreachable_why
from pytest_sglang.gates.keywords import OptionalCount, Requires, Threshold, sglang_choices
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen.workloads.prefix_reuse import ReuseResult, run_prefix_reuse
from pytest_sglang.sglang.hostmem import GB, GiB

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle, Member
    from pytest_sglang.server.phases import HostPool, StartupReport
    from pytest_sglang.sglang.metrics_text import Sample


@runtime_checkable
class HicacheServer(Protocol):
    """What this gate reads from a server (an ``SGLangServer``, or a fake in tests)."""

    @property
    def startup(self) -> StartupReport | None:
        """The startup report; None when attached (no startup log was read)."""

    def info(self) -> dict[str, Any]:
        """The ``/server_info`` payload."""

    def metrics(self) -> dict[str, list[Sample]]:
        """The ``/metrics`` samples, keyed by sample name."""

class HicacheKeywords(TypedDict, total=False):
    """The configuration and pool keywords :func:`evaluate_hicache` takes (the marker's first eight)."""

    enabled: bool
    min_host_tokens: int | None
    min_host_gb_per_rank: float | None
    min_ratio: float | None
    write_policy: str | None
    io_backend: str | None
    mem_layout: str | None
    storage_backend: str | None


@runtime_checkable
class _Membered(Protocol):
    """A handle (server/members.py): it tells its members; a bare fake server in tests does not."""

    def members(self) -> Sequence[Member]:
        """The servers behind the handle."""


GATE = "hicache"
_ENABLE = ("launch through the plugin (startup-log host pool lines) or add --enable-metrics "
           "(the sglang:hicache_host_total_tokens gauge)")
_SIZE_FIX = ("raise --hicache-size (decimal GB per rank) or --hicache-ratio (host/device tokens); check "
             "the host fits first: python -m pytest_sglang plan -- <launch args>")
# Marker keyword types: the choices are SGLang's own (its flag table), so a typo is a usage error.
WritePolicy = Annotated[str | None, sglang_choices("--hicache-write-policy")]
IoBackend = Annotated[str | None, sglang_choices("--hicache-io-backend")]
MemLayout = Annotated[str | None, sglang_choices("--hicache-mem-layout")]
StorageBackend = Annotated[str | None, sglang_choices("--hicache-storage-backend")]


@dataclass(frozen=True)
class HostPools:
    """The host pool per rank as measured, with where the figures came from."""

    tokens: tuple[int, ...] = ()
    gb: tuple[float, ...] = ()
    source: str = ""
    gb_source: str = ""
    #: Ranks that logged a pool (None when no startup log was read).
    logged_ranks: int | None = None


def _metric_tokens(server: HicacheServer) -> tuple[int, ...]:
    try:
        samples = server.metrics().get("sglang:hicache_host_total_tokens", [])
    except SGLangError:
        return ()  # metrics off (404)
    return tuple(int(s.value) for s in samples)


def _log_pools(server: HicacheServer) -> list[HostPool]:
    pools = server.startup.host_pools if server.startup is not None else []
    return [p for p in pools if p.pool == "kv"]


def _device_bytes_per_token(info: Mapping[str, Any]) -> float | None:
    states = info.get("internal_states") or [{}]
    usage = (states[0].get("memory_usage") or {}) if isinstance(states[0], Mapping) else {}
    kv, cap = usage.get("kvcache"), usage.get("token_capacity")
    if isinstance(kv, (int, float)) and isinstance(cap, int) and kv > 0 and cap > 0:
        return kv * GiB / cap
    return None


def host_pools(server: HicacheServer, info: Mapping[str, object]) -> HostPools:
    """Measured host pools: the metric gauge first, then the startup log."""
    logged = _log_pools(server)
    log_gb = tuple(float(p.gb) for p in logged)
    log_src = f"startup log: {len(logged)} 'Allocating kv hierarchical KV host pool' line(s)"
    ranks = len(logged) if logged else None
    tokens = _metric_tokens(server)
    source = "/metrics sglang:hicache_host_total_tokens"
    logged_tokens = tuple(p.tokens for p in logged if p.tokens is not None)
    if not tokens and logged and len(logged_tokens) == len(logged):
        tokens, source = logged_tokens, log_src
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
    # Each configuration keyword is /server_info ``hicache_<keyword>``, set by ``--hicache-<keyword>``.
    fix = ("add --enable-hierarchical-cache (and --hicache-size N, GB per rank) to the launch args"
           if enabled else "remove --enable-hierarchical-cache from the launch args")
    out.add(compare(GATE, "enable_hierarchical_cache", info.get("enable_hierarchical_cache"), "==", enabled,
                    source="/server_info enable_hierarchical_cache", remedy=fix, keyword="enabled"))
    for key, value in wanted.items():
        field, flag = f"hicache_{key}", "--hicache-" + key.replace("_", "-")
        note = (" (SGLang rewrites page_first with --hicache-io-backend direct to page_first_direct)"
                if key == "mem_layout" else "")
        out.add(compare(GATE, field, info.get(field), "==", value, source=f"/server_info {field}",
                        remedy=f"launch with {flag} {value}{note}", keyword=key))


def _size_checks(out: GateOutcome, pools: HostPools, info: Mapping[str, Any], min_host_tokens: int | None,
                 min_host_gb_per_rank: float | None, min_ratio: float | None) -> None:
    least = min(pools.tokens) if pools.tokens else None
    if min_host_tokens is not None:
        out.add(compare(GATE, "host_pool_tokens", least, ">=", min_host_tokens, unit="tokens",
                        source=pools.source, remedy=_SIZE_FIX, keyword="min_host_tokens"))
    if min_host_gb_per_rank is not None:
        gb = round(min(pools.gb), 2) if pools.gb else None
        out.add(compare(GATE, "host_pool_gb_per_rank", gb, ">=", min_host_gb_per_rank, unit="GB",
                        source=pools.gb_source or f"not available: {_ENABLE}", remedy=_SIZE_FIX,
                        keyword="min_host_gb_per_rank"))
    if min_ratio is not None:
        device = token_capacity(info)
        ratio = None if least is None or not device.least else round(least / device.least, 3)
        out.add(compare(GATE, "host_device_ratio", ratio, ">=", min_ratio,
                        source=f"{pools.source} / {device.source}", remedy=_SIZE_FIX, keyword="min_ratio"))


def evaluate_hicache(
    server: HicacheServer, *, enabled: bool = True, min_host_tokens: int | None = None,
    min_host_gb_per_rank: float | None = None, min_ratio: float | None = None,
    write_policy: str | None = None, io_backend: str | None = None, mem_layout: str | None = None,
    storage_backend: str | None = None,
) -> GateOutcome:
    """Check the hierarchical cache of ``server`` (an :class:`~pytest_sglang.server.SGLangServer`).

    The keywords are checked as the ``sglang_hicache`` marker declares them (:func:`run_marker`).
    """
    wanted = {k: v for k, v in (("write_policy", write_policy), ("io_backend", io_backend),
                                ("mem_layout", mem_layout), ("storage_backend", storage_backend))
              if v is not None}
    sizes = {"min_host_tokens": min_host_tokens, "min_host_gb_per_rank": min_host_gb_per_rank,
             "min_ratio": min_ratio}
    keywords.check(run_marker, "evaluate_hicache",
                   {"enabled": enabled, **wanted, **{k: v for k, v in sizes.items() if v is not None}})
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


def assert_hicache(
    server: Handle | HicacheServer, *, enabled: bool = True, min_host_tokens: int | None = None,
    min_host_gb_per_rank: float | None = None, min_ratio: float | None = None, write_policy: str | None = None,
    io_backend: str | None = None, mem_layout: str | None = None, storage_backend: str | None = None,
) -> GateOutcome:
    """:func:`evaluate_hicache`, raising ``AssertionError(outcome.message())`` on a miss.

    ``server`` is a handle (``sglang_server``, ``sglang_fleet``): each of its members is checked, a fleet's
    workers one record each, as the marker does; or any object with ``info()``, ``metrics()`` and
    ``startup`` (a fake in tests), checked as one server.
    """
    __tracebackhide__ = True
    given = HicacheKeywords(enabled=enabled, min_host_tokens=min_host_tokens,
                            min_host_gb_per_rank=min_host_gb_per_rank, min_ratio=min_ratio,
                            write_policy=write_policy, io_backend=io_backend, mem_layout=mem_layout,
                            storage_backend=storage_backend)
    if isinstance(server, _Membered):
        outcome = evaluate_fleet_hicache(server, **given)
    elif isinstance(server, HicacheServer):
        outcome = evaluate_hicache(server, **given)
    else:
        raise TypeError(f"assert_hicache() takes a server or a fleet, not {type(server).__name__}")
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
                              remedy=fix, detail=result.shape(), keyword="min_gain",
                              source=f"first pass {result.first.seconds:.3f} s / second pass "
                                     f"{result.second.seconds:.3f} s (wall time)"))
    return checks


def _host_tokens_for_workload(server: HicacheServer, info: Mapping[str, Any]) -> int | None:
    pools = host_pools(server, info)
    if pools.tokens:
        return min(pools.tokens)
    per_token, device = _device_bytes_per_token(info), token_capacity(info).least
    size, ratio = info.get("hicache_size"), info.get("hicache_ratio")
    if isinstance(size, int) and size > 0 and per_token:
        return int(size * GB / per_token)
    return int(device * ratio) if isinstance(ratio, (int, float)) and device else None


def _unmeasured(reason: str, remedy: str) -> Check:
    return compare(GATE, "host_hit_tokens", None, ">=", 1, source=reason, remedy=remedy)


def run_effective(ctx: GateContext, server: Handle, outcome: GateOutcome, min_gain: float | None) -> None:
    """The ``effective=True`` workload against ``server`` (under the run-wide load lock); checks into ``outcome``."""
    info = server.info()
    if info.get("enable_hierarchical_cache") is not True:
        outcome.add(_unmeasured("workload not run: /server_info enable_hierarchical_cache is not true",
                                "add --enable-hierarchical-cache to the launch args"))
        return
    device, host = token_capacity(info).least, _host_tokens_for_workload(server, info)
    max_input = info.get("max_req_input_len")
    if device is None or host is None or not isinstance(max_input, int):
        outcome.add(_unmeasured(f"workload not sized: {_ENABLE}", "make the host pool size visible"))
        return
    try:
        with ctx.load_lock():
            result = run_prefix_reuse(server, device_tokens=device, host_tokens=host, max_input=max_input)
    except ValueError as exc:
        outcome.add(_unmeasured(f"workload not possible: {exc}", _SIZE_FIX))
        return
    for check in effective_checks(result, min_gain):
        outcome.add(check)
    outcome.context["reuse workload"] = result.shape()


@keywords.rules(
    keywords.Always("the server's enable_hierarchical_cache equals enabled (True or False)"),
    Requires("min_gain", needs=("effective",), why="the gain is measured by the effective=True workload",
             fix="add effective=True, or drop min_gain"),
    Requires("effective", needs=("enabled",), why="the workload measures the cache that enabled=True checks",
             fix="drop enabled=False, or effective=True"),
    Requires("min_storage_share", needs=("restart",), why="the share is measured by the restart=True workload",
             fix="add restart=True, or drop min_storage_share"),
    Requires("restart", needs=("enabled",), why="the restart proves the storage tier of the hierarchical cache",
             fix="drop enabled=False, or restart=True"),
)
def run_marker(
    ctx: GateContext, *, enabled: bool = True, min_host_tokens: OptionalCount = None,
    min_host_gb_per_rank: Threshold = None, min_ratio: Threshold = None, write_policy: WritePolicy = None,
    io_backend: IoBackend = None, mem_layout: MemLayout = None, storage_backend: StorageBackend = None,
    effective: bool = False, min_gain: Threshold = None, restart: bool = False,
    min_storage_share: Annotated[float | None, keywords.Fraction()] = None,
) -> GateOutcome:
    """The ``sglang_hicache`` marker: configuration and pool checks, then the workload if ``effective``.

    On a fleet (a gateway) every worker is checked and, with ``effective=True``, runs the workload
    itself (sent to it directly), one record per worker. ``restart=True`` restarts the launched server and
    fails unless ``min_storage_share`` (0.5 unless given) of the same prompts' tokens come back from the
    storage tier (:mod:`pytest_sglang.gates.production.storage_restart`).
    This signature declares the marker's keywords (types, defaults, ranges, SGLang's choices,
    relations): the plugin validates a marker against it at collection and shows it in ``--markers``.
    """
    outcome = evaluate_fleet_hicache(
        ctx.server, enabled=enabled, min_host_tokens=min_host_tokens, min_host_gb_per_rank=min_host_gb_per_rank,
        min_ratio=min_ratio, write_policy=write_policy, io_backend=io_backend, mem_layout=mem_layout,
        storage_backend=storage_backend)
    if effective:
        effective_per_worker(ctx, ctx.server, outcome, min_gain)
    if restart:  # after the effective workload: a restart would empty the tiers it measures
        from pytest_sglang.gates.production.storage_restart import run_restart

        # A handle whose members are named is several servers (a fleet): the restart is of one launch.
        several = any(member.label() is not None for member in ctx.server.members())
        with ctx.load_lock():
            run_restart(ctx.server, outcome, min_storage_share, fleet=several)
    return outcome


#: hicache size keyword -> the metric the single-server gate records.
_HICACHE_SIZES = {"min_host_tokens": "host_pool_tokens", "min_host_gb_per_rank": "host_pool_gb_per_rank",
                  "min_ratio": "host_device_ratio"}


def _unreachable_hicache(out: GateOutcome, worker: Member, why: str, given: HicacheKeywords) -> None:
    why = why if worker.server is not None else unreachable_why(worker, "hierarchical-cache settings")
    enabled = given.get("enabled", True)
    out.add(not_checked(GATE, "enable_hierarchical_cache", worker, enabled, op="==", keyword="enabled", why=why))
    wanted = (("write_policy", given.get("write_policy")), ("io_backend", given.get("io_backend")),
              ("mem_layout", given.get("mem_layout")), ("storage_backend", given.get("storage_backend")))
    for key, value in wanted:
        if value is not None:
            out.add(not_checked(GATE, f"hicache_{key}", worker, value, op="==", keyword=key, why=why))
    sizes = (("min_host_tokens", given.get("min_host_tokens")),
             ("min_host_gb_per_rank", given.get("min_host_gb_per_rank")), ("min_ratio", given.get("min_ratio")))
    for key, size in sizes:
        if size is not None and enabled:
            out.add(not_checked(GATE, _HICACHE_SIZES[key], worker, size, keyword=key, why=why))


def evaluate_fleet_hicache(
    fleet: Handle, *, enabled: bool = True, min_host_tokens: int | None = None,
    min_host_gb_per_rank: float | None = None, min_ratio: float | None = None, write_policy: str | None = None,
    io_backend: str | None = None, mem_layout: str | None = None, storage_backend: str | None = None,
) -> GateOutcome:
    """:func:`evaluate_hicache` on every member of the handle (its keywords), a fleet's workers one record each.

    A lone server is its own one member: its records keep plain names and its errors are raised as they
    are; a fleet's worker that cannot be read is noted on its records and the others are still judged.
    """
    given = HicacheKeywords(enabled=enabled, min_host_tokens=min_host_tokens,
                            min_host_gb_per_rank=min_host_gb_per_rank, min_ratio=min_ratio,
                            write_policy=write_policy, io_backend=io_backend, mem_layout=mem_layout,
                            storage_backend=storage_backend)
    keywords.check(run_marker, "evaluate_fleet_hicache", {k: v for k, v in given.items() if v is not None})
    out = GateOutcome(GATE)
    members = fleet.members()
    if not members:
        out.add(no_workers(GATE, fleet))
    parts: list[tuple[Member, GateOutcome]] = []
    for worker in members:
        server = worker.server
        why = worker.unreachable or "not reachable from here"
        part = None
        if server is not None and worker.label() is None:
            part = evaluate_hicache(server, **given)
        elif server is not None:
            try:
                part = evaluate_hicache(server, **given)
            except SGLangError as exc:
                why = f"its /server_info or /metrics could not be read: {str(exc).splitlines()[0]}"
        if part is None:
            _unreachable_hicache(out, worker, why, given)
            continue
        out.checks += [for_worker(c, worker) for c in part.checks]
        parts.append((worker, part))
    merge_context(out, parts)
    return out


def effective_per_worker(ctx: GateContext, fleet: Handle, outcome: GateOutcome, min_gain: float | None) -> None:
    """``effective=True``: the reuse workload sent to each member directly, a fleet's workers one record each.

    Through the gateway the prefixes would be spread over the workers and no single host tier would
    be shown to work, so each reachable worker runs it in turn (a lone server: itself, records as they are).
    """
    for worker in fleet.members():
        if worker.server is None:
            outcome.add(not_checked(GATE, "host_hit_tokens", worker, 1,
                                    why=unreachable_why(worker, "host-tier hits (the workload is sent to "
                                                                 "each worker directly)")))
            continue
        part = GateOutcome(GATE)
        run_effective(ctx, worker.server, part, min_gain)
        outcome.checks += [for_worker(c, worker) for c in part.checks]
        label = worker.label()
        for key, value in part.context.items():
            outcome.context[key if label is None else f"{key} ({label})"] = value
