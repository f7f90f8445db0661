"""The ``/metrics`` families of 0.5.23 that stay (nearly) constant on a simulated server.

Memory gauges come from the same arithmetic as ``/server_info``'s ``memory_usage``; the scheduler
gauges are the values an idle-to-moderately-loaded 0.5.23 reports (no retraction, no pausing).
"""

from __future__ import annotations

from pytest_sglang.simulator.launch.payloads import GRAPH_PHASES, memory_usage
from pytest_sglang.simulator.scheduling.prometheus import PromText
from pytest_sglang.simulator.scheduling.prometheus import labels as _labels
from pytest_sglang.simulator.scheduling.speculative import Speculation
from pytest_sglang.simulator.state import State

#: SGLang's initial new-token ratio (SGLANG_INIT_NEW_TOKEN_RATIO 0.7 x schedule_conservativeness 1.0);
#: it only decays while requests are being retracted, which the simulator never does.
NEW_TOKEN_RATIO = 0.7


def render_extra(out: PromText, state: State, sched: dict[str, str], tok: dict[str, str]) -> None:
    """Append the memory, scheduler and HTTP-in-flight families to ``out``."""
    cfg = state.cfg
    mem = memory_usage(cfg)
    gauges = (
        ("kv_cache_memory_usage_gb", "KV cache memory usage in GB.", mem["kvcache"]),
        ("weight_memory_usage_gb", "Model weight memory usage in GB.", mem["weight"]),
        ("startup_available_gpu_memory_gb", "Available GPU memory at startup in GB.", mem["startup_available"]),
        ("new_token_ratio", "The new token ratio.", NEW_TOKEN_RATIO),
        ("num_retracted_reqs", "The number of retracted requests.", 0.0),
        ("num_paused_reqs", "The number of paused requests by async weight sync.", 0.0),
        ("is_cuda_graph", "Whether the batch is using CUDA graph.", 0.0 if cfg.graph_disabled("decode") else 1.0),
    )
    s = _labels(**sched)
    for name, help_text, value in gauges:
        out.family(name, "gauge", help_text, [(s, value)])
    out.family(
        "graph_memory_usage_gb",
        "gauge",
        "CUDA graph memory usage in GB by phase.",
        [(_labels(**sched, phase=p), mem["graph"][p]) for p in GRAPH_PHASES],
    )
    out.family(
        "startup_cuda_graph_time_seconds",
        "gauge",
        "CUDA graph capture time at startup in seconds by phase.",
        [(_labels(**tok, phase=p), state.times.get(f"graph_{p}", 0.0)) for p in GRAPH_PHASES],
    )
    out.family(
        "http_requests_active",
        "gauge",
        "Number of HTTP requests being served.",
        [(_labels(endpoint=p, method=m), v) for (p, m), v in sorted(state.http_active.items())],
    )


def render_speculative(out: PromText, spec: Speculation, sched: str, tok: dict[str, str]) -> None:
    """0.5.23's speculative families: the last batch's gauges (``mostrecent``) and the verify counter."""
    out.family("spec_accept_length", "gauge", "Mean acceptance length of speculative decoding (accepted drafts + "
               "bonus token per forward).", [(sched, spec.last_length)])
    out.family("spec_accept_rate", "gauge", "Speculative acceptance rate (`accepted drafts / proposed drafts` in "
               "batch).", [(sched, spec.last_rate)])
    out.family("spec_verify_calls_total", "counter", "Total number of speculative verify calls.",
               [(_labels(**tok), float(spec.verify_total))])
