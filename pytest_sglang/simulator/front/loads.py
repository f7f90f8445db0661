"""``GET /v1/loads``: the per-DP-rank load snapshot gateways poll (smg 1.x every 10 s).

Mirrors 0.5.23's ``srt/entrypoints/v1_loads.py`` and ``managers/load_snapshot.py`` (checked against
the real server on CPU): ``include`` picks sections (an unknown one is an unhandled ValueError, so a
bare 500), ``dp_rank`` filters (out of range: no loads; not an integer: the 400 validation envelope),
``format=prometheus`` renders the same values as ``sglang_*`` gauges. The simulator has one engine:
DP rank 0 carries its live figures, other ranks report idle.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from pytest_sglang.simulator.disagg import node as pd
from pytest_sglang.simulator.front.respond import error_response, json_response
from pytest_sglang.simulator.launch.payloads import memory_usage
from pytest_sglang.simulator.state import State

SECTIONS = frozenset({"core", "memory", "spec", "lora", "disagg", "queues", "all"})
#: (key in a load, name in ``include``) of the sections a snapshot can carry, in 0.5.23's order.
_SECTION_KEYS = (("memory", "memory"), ("speculative", "spec"), ("lora", "lora"),
                 ("disaggregation", "disagg"), ("queues", "queues"))
_PROM_PREFIX = {"speculative": "spec", "disaggregation": "disagg"}
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _last(request: web.Request, name: str) -> str | None:
    values = request.query.getall(name, [])
    return values[-1] if values else None  # FastAPI takes a repeated scalar query parameter's last value


def _snapshot(state: State, rank: int) -> dict[str, Any]:
    """One rank's LoadSnapshot with every section (``to_dict`` then drops the ones not asked for)."""
    cfg, e = state.cfg, state.engine
    live = rank == 0
    st = e.stats
    waiting = list(e.waiting) if live else []
    used = e.used_tokens if live else 0
    total = used + sum(len(r.prompt_ids) for r in waiting)
    mem = memory_usage(cfg)
    moments = st.decode_moments if live else [0.0] * 6
    snap: dict[str, Any] = {
        "timestamp": time.time(),
        "dp_rank": rank,
        "num_running_reqs": len(e.running) + e.leaked if live else 0,
        "num_waiting_reqs": len(waiting),
        "num_waiting_uncached_tokens": sum(int(len(r.prompt_ids) * (1 - st.cache_hit_rate)) for r in waiting),
        "num_used_tokens": used,
        "num_total_tokens": total,
        "num_active_tokens": total,
        "num_prealloc_ready_tokens": 0,
        "max_total_num_tokens": cfg.max_total_num_tokens,
        "max_running_requests": cfg.max_running_requests,
        "token_usage": round(used / max(1, e.capacity), 4),
        "gen_throughput": round(st.gen_throughput(), 2) if live else 0.0,
        "cache_hit_rate": round(st.cache_hit_rate, 4) if live else 0.0,
        "utilization": round(min(1.0, len(e.running) / max(1, e.max_running)), 4) if live else 0.0,
        "total_prefill_uncached_tokens": st.prefill_uncached_tokens if live else 0,
        "total_prefill_busy_us": st.prefill_busy_us if live else 0,
        "decode_moments": list(moments) if moments[0] > 0 else None,
        "memory": {"weight_gb": mem["weight"], "kv_cache_gb": mem["kvcache"],
                   "graph_gb": round(sum(mem["graph"].values()), 3), "token_capacity": cfg.max_total_num_tokens},
        "disaggregation": {"mode": str(cfg.args.passthrough.get("disaggregation_mode") or "null"),
                           "prefill_bootstrap_queue_reqs": 0, "prefill_inflight_queue_reqs": 0,
                           "decode_prealloc_queue_reqs": 0, "decode_transfer_queue_reqs": 0,
                           "decode_retracted_queue_reqs": 0, "kv_transfer_speed_gb_s": 0.0,
                           "kv_transfer_latency_ms": 0.0},
        "queues": {"waiting": len(waiting), "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0},
    }
    return snap


def _to_dict(snap: dict[str, Any], include: set[str] | None) -> dict[str, Any]:
    """0.5.23's ``LoadSnapshot.to_dict``: core keys, then the sections ``include`` asks for."""
    sections = {key for key, _ in _SECTION_KEYS}
    load = {k: v for k, v in snap.items() if k not in sections}
    if include is not None and "all" not in include:
        if not include <= SECTIONS:
            raise ValueError(f"Invalid include sections: {include - SECTIONS}")
        if include == {"core"}:
            return load
    for key, name in _SECTION_KEYS:
        if key in snap and (include is None or "all" in include or name in include):
            load[key] = snap[key]
    return load


def _prometheus(loads: list[dict[str, Any]]) -> str:
    samples: dict[str, list[tuple[int, float]]] = {}
    for load in loads:
        rank = load["dp_rank"]
        for key, value in load.items():
            if isinstance(value, dict):
                prefix = _PROM_PREFIX.get(key, key)
                for sub, sub_value in value.items():
                    if isinstance(sub_value, int | float):
                        samples.setdefault(f"sglang_{prefix}_{sub}", []).append((rank, sub_value))
            elif isinstance(value, int | float) and key != "dp_rank":
                samples.setdefault(f"sglang_{key}", []).append((rank, value))
    lines: list[str] = []
    for name, values in samples.items():
        lines.append(f"# TYPE {name} gauge")
        lines += [f'{name}{{dp_rank="{rank}"}} {value}' for rank, value in values]
    return "\n".join(lines) + "\n"


def _bad_rank(text: str) -> web.Response:
    err = (f"{{'type': 'int_parsing', 'loc': ('query', 'dp_rank'), 'msg': 'Input should be a valid integer, "
           f"unable to parse string as an integer', 'input': {text!r}}}")
    return error_response(f"1 validation error:\n  {err}\n\n  GET /v1/loads [{err}]", "Bad Request", 400)


def respond(state: State, request: web.Request) -> web.Response:
    """``GET /v1/loads[?include=...&dp_rank=N&format=prometheus]`` (works without --enable-metrics)."""
    cfg = state.cfg
    rank_text, include_text = _last(request, "dp_rank"), _last(request, "include")
    try:
        rank = int(rank_text) if rank_text is not None else None
    except ValueError:
        return _bad_rank(rank_text or "")
    ranks = range(cfg.args.dp_size)
    snaps = [_snapshot(state, r) for r in ranks if rank is None or r == rank]
    pd_section = pd.loads_disaggregation(request)  # a prefill/decode worker's live queues and transfers
    if pd_section is not None:
        for snap in snaps:
            snap["disaggregation"] = pd_section
    include = {s.strip() for s in include_text.split(",")} if include_text else None
    try:
        loads_ = [_to_dict(s, include) for s in snaps]
    except ValueError:
        # 0.5.23 raises this outside its try block: Starlette's bare 500
        return web.Response(text="Internal Server Error", status=500, content_type="text/plain")
    if _last(request, "format") == "prometheus":
        return web.Response(body=_prometheus(loads_).encode(), headers={"Content-Type": PROMETHEUS_TYPE})
    attention_dp = bool(cfg.args.passthrough.get("enable_dp_attention"))
    return json_response({
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "version": "0.5.23",
        # torch's device name; None on a CPU server
        "accelerator": None if cfg.on_cpu else cfg.profile.gpu_name,
        "num_accelerators": cfg.ranks // cfg.args.dp_size if attention_dp else cfg.ranks,
        "loads": loads_,
    })
