"""Bodies of /server_info and /model_info, built on the recorded SGLang 0.5.23 payloads.

The template (``data/sglang_0_5_23_payloads.json``) is the body a real 0.5.23 server returned; the
simulator overlays its resolved launch arguments. Like real SGLang, ``api_key`` and
``admin_api_key`` are shown in clear text (top level, every internal_states item, launch_command):
scrubbing them is the plugin's job.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import fields
from functools import lru_cache
from importlib import resources
from typing import Any

from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.hostmem import GiB
from pytest_sglang.simulator.config import SimConfig

GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")


@lru_cache(maxsize=1)
def _template() -> dict[str, Any]:
    text = resources.files("pytest_sglang.simulator").joinpath("data/sglang_0_5_23_payloads.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _coerce(value: Any, like: Any) -> Any:
    """A pass-through flag's value (a string, or True for a bare flag) typed like the template's."""
    if isinstance(like, bool) or value is True:
        return True if value is True else str(value).lower() in ("1", "true", "yes")
    for kind in (int, float):
        if isinstance(like, kind):
            try:
                return kind(value)
            except (TypeError, ValueError):
                return value
    return value


def server_args(cfg: SimConfig, port: int) -> dict[str, Any]:
    """The resolved ServerArgs dict (what SGLang logs as ``server_args=`` and serves at the top level)."""
    out = {k: v for k, v in _template()["server_info"].items() if k not in _NOT_ARGS}
    a = cfg.args
    for f in fields(LaunchArgs):
        if f.name in out:  # the modelled ServerArgs fields (not LaunchArgs' own bookkeeping)
            out[f.name] = getattr(a, f.name)
    for name, value in a.passthrough.items():
        out[name] = _coerce(value, out.get(name))
    explicit_hicache = a.hicache_size > 0 or a.hicache_ratio is not None
    out.update(
        model_path=cfg.model_path,
        tokenizer_path=a.tokenizer_path or cfg.model_path,
        served_model_name=cfg.served_model_name,
        port=port,
        mem_fraction_static=cfg.mem_fraction_static,
        chunked_prefill_size=cfg.chunked_prefill_size,
        page_size=cfg.page_size,
        random_seed=cfg.random_seed,
        device=a.device or "cuda",
        hicache_ratio=cfg.hicache_ratio,
        hicache_host_memory_fraction=None if explicit_hicache else a.hicache_host_memory_fraction,
        attention_backend=out.get("attention_backend")
        if "attention_backend" in a.passthrough
        else ("flashmla" if cfg.profile.mla else "flashinfer"),
        disable_cuda_graph=bool(a.passthrough.get("disable_cuda_graph", False)),
    )
    return out


_NOT_ARGS = {
    "launch_command",
    "status",
    "max_total_num_tokens",
    "max_req_input_len",
    "startup_time",
    "hicache_object_layout",
    "kv_events",
    "internal_states",
    "version",
    "frontend",
}


def startup_time(times: dict[str, float], *, tokenizer: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "load_weight": times.get("weights", 0.0),
        "kv_cache_allocation": times.get("kv_cache", 0.0),
        "scheduler_e2e": sum(times.values()),
        "cuda_graph": {p: times.get(f"graph_{p}", 0.0) for p in GRAPH_PHASES},
    }
    if tokenizer:
        out["tokenizer_e2e"] = sum(times.values()) + times.get("uvicorn", 0.0)
    return out


DECODE_GRAPH_BS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256]


def graph_memory_gb(cfg: SimConfig, kind: str) -> float:
    """GPU memory a captured ``kind`` CUDA graph takes (0 when not captured)."""
    if cfg.graph_disabled(kind) is not None:
        return 0.0
    return cfg.hw.gpu_memory_bytes / GiB * (0.012 if kind == "decode" else 0.004)


def memory_usage(cfg: SimConfig) -> dict[str, Any]:
    weight = cfg.profile.weight_bytes_per_rank(cfg.args.tp_size, cfg.args.pp_size) / GiB
    kv = cfg.max_total_num_tokens * cfg.kv_bytes_per_token / GiB
    total = cfg.hw.gpu_memory_bytes / GiB
    graph = {p: 0.0 for p in GRAPH_PHASES}
    graph.update({kind: round(graph_memory_gb(cfg, kind), 3) for kind in ("prefill", "decode")})
    return {
        "weight": round(weight, 3),
        "kvcache": round(kv, 3),
        "startup_available": round(total * (1 - cfg.mem_fraction_static), 3),
        "token_capacity": cfg.max_total_num_tokens,
        "token_capacity_swa": None,
        "graph": graph,
    }


def server_info(
    cfg: SimConfig, *, port: int, argv: Sequence[str], times: dict[str, float], last_gen_throughput: float
) -> dict[str, Any]:
    """The /server_info body (same layout as the recorded 0.5.23 one)."""
    args = server_args(cfg, port)
    body = dict(args)
    body["launch_command"] = " ".join(argv)
    body.update(
        status="ready",
        max_total_num_tokens=cfg.max_total_num_tokens,
        max_req_input_len=cfg.max_req_input_len,
        startup_time=startup_time(times, tokenizer=True),
    )
    layout = copy.deepcopy(_template()["server_info"]["hicache_object_layout"])
    layout["page_size"] = cfg.page_size
    if cfg.args.enable_hierarchical_cache:
        layout["reason"] = "Mooncake storage is not attached"
    body.update(hicache_object_layout=layout, kv_events=None)
    state = {k: v for k, v in args.items() if k != "custom_sigquit_handler"}
    mem = memory_usage(cfg)
    state.update(
        hicache_ratio=cfg.host_pool.ratio if cfg.host_pool and cfg.host_pool.ratio is not None else cfg.hicache_ratio,
        world_size=cfg.args.dp_size * cfg.ranks,
        startup_time=startup_time(times, tokenizer=False),
        effective_max_running_requests_per_dp=cfg.max_running_requests,
        last_gen_throughput=last_gen_throughput,
        memory_usage=mem,
        disaggregation_mode="null",
        # the scheduler's resolved values (the top-level args keep the user's None)
        pp_max_micro_batch_size=cfg.max_running_requests,
        disaggregation_decode_retraction_backup="cpu_tensor",
        decode_cuda_graph_bs=[] if cfg.graph_disabled("decode") else list(DECODE_GRAPH_BS),
        decode_cuda_graph_memory_gb=mem["graph"]["decode"],
    )
    body["internal_states"] = [dict(state) for _ in range(cfg.args.dp_size)]
    body.update(version="0.5.23", frontend="python")
    return body


def model_info(cfg: SimConfig) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(_template()["model_info"])
    body.update(
        model_path=cfg.model_path,
        served_model_name=cfg.served_model_name,
        tokenizer_path=cfg.args.tokenizer_path or cfg.model_path,
        load_format=cfg.args.load_format,
        model_type=cfg.profile.model_type,
        architectures=[cfg.profile.architecture],
    )
    vision = cfg.vision
    if vision is not None:  # a vision-language model: 0.5.23 reports it here (warmup reads it too)
        body.update(has_image_understanding=True, model_type=vision.model_type, architectures=[vision.architecture])
    for name in ("reasoning_parser", "tool_call_parser"):  # 0.5.23 reports the launch's parsers here too
        if cfg.args.passthrough.get(name) is not None:
            body[name] = str(cfg.args.passthrough[name])
    return body


def models_list(cfg: SimConfig, created: int) -> dict[str, Any]:
    name = cfg.served_model_name
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "sglang",
                "root": name,
                "parent": None,
                "max_model_len": cfg.context_len,
            }
        ],
    }
