"""``/metrics`` in Prometheus text format (SGLang's ``sglang:`` series and labels, reference §6)."""

from __future__ import annotations

from pytest_sglang.simulator.front.metrics_extra import render_extra, render_speculative
from pytest_sglang.simulator.scheduling.prometheus import PromText
from pytest_sglang.simulator.scheduling.prometheus import labels as _labels
from pytest_sglang.simulator.state import State


def render(state: State) -> str:
    cfg, e = state.cfg, state.engine
    st = e.stats
    model = cfg.served_model_name
    sched_labels = dict(engine_type="unified", model_name=model, moe_ep_rank="0", pp_rank="0", tp_rank="0")
    sched = _labels(**sched_labels)
    tok = {"engine_type": "unified", "model_name": model}
    out = PromText()
    cap = max(1, e.capacity)
    gauges: list[tuple[str, str, float]] = [
        ("num_running_reqs", "The number of running requests.", len(e.running) + e.leaked),
        # requests held by a stalled rank or scheduler (stall faults) wait in its queue
        ("num_queue_reqs", "The number of requests in the waiting queue.", len(e.waiting) + len(e.stuck)),
        ("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", 0),
        ("token_usage", "The token usage.", e.used_tokens / cap),
        ("full_token_usage", "The token usage of full attention layers.", e.used_tokens / cap),
        ("num_used_tokens", "The number of used tokens.", e.used_tokens),
        ("kv_used_tokens", "KV tokens in use.", e.used_tokens),
        ("kv_available_tokens", "KV tokens available.", max(0, e.free_tokens)),
        ("kv_evictable_tokens", "KV tokens held by the radix cache and evictable.", e.cache.evictable_tokens),
        (
            "max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            cfg.max_total_num_tokens,
        ),
        ("page_size", "KV cache page size.", cfg.page_size),
        ("num_pages", "Number of KV cache pages.", cfg.max_total_num_tokens // cfg.page_size),
        ("context_len", "Model context length.", cfg.context_len),
        ("gen_throughput", "The generation throughput (token/s).", st.gen_throughput()),
        ("cache_hit_rate", "The prefix cache hit rate.", st.cache_hit_rate),
        ("utilization", "Scheduler utilization.", min(1.0, len(e.running) / max(1, e.max_running))),
    ]
    if cfg.host_pool is not None:
        gauges += [
            ("hicache_host_used_tokens", "HiCache host pool tokens in use.", e.cache.host_tokens),
            ("hicache_host_total_tokens", "HiCache host pool size in tokens.", cfg.host_pool.tokens),
        ]
    for name, help_text, value in gauges:
        out.family(name, "gauge", help_text, [(sched, value)])
    phases = {
        "load_weight": state.times.get("weights", 0.0),
        "kv_cache_allocation": state.times.get("kv_cache", 0.0),
        "scheduler_e2e": sum(state.times.values()),
        "tokenizer_e2e": sum(state.times.values()),
    }
    out.family(
        "startup_time_seconds",
        "gauge",
        "Engine startup duration by phase in seconds.",
        [(_labels(**tok, phase=k), v) for k, v in phases.items()],
    )
    render_extra(out, state, sched_labels, tok)
    if e.spec is not None:
        render_speculative(out, e.spec, sched, tok)
    _counters(out, state, tok)
    _histograms(out, state, tok)
    return "\n".join(out.lines) + "\n"


def _counters(out: PromText, state: State, tok: dict[str, str]) -> None:
    st = state.engine.stats
    for name, help_text, data in (
        ("num_requests_total", "Number of requests processed.", st.requests),
        ("prompt_tokens_total", "Number of prefill tokens processed.", st.prompt_tokens),
        ("generation_tokens_total", "Number of generation tokens processed.", st.generation_tokens),
    ):
        out.family(
            name,
            "counter",
            help_text,
            [(_labels(**tok, is_streaming=s), data.get(s, 0)) for s in ("false", "true")],
        )
    out.family(
        "cached_tokens_total",
        "counter",
        "Number of cached prompt tokens by source (device/host/storage).",
        [(_labels(**tok, cache_source=k), v) for k, v in st.cached.items()],
    )
    base = dict(
        engine_type="unified", model_name=tok["model_name"], moe_ep_rank="0", pp_rank="0", tp_rank="0"
    )
    out.family(
        "prefill_effective_tokens_total",
        "counter",
        "Effective prefill tokens by mode.",
        [(_labels(**base, mode=k), v) for k, v in st.effective.items()],
    )
    out.family(
        "realtime_tokens_total",
        "counter",
        "Tokens processed by mode.",
        [
            (_labels(**base, mode="prefill_compute"), st.effective["input"]),
            (_labels(**base, mode="prefill_cache"), st.effective["device_hit"] + st.effective["host_hit"]),
            (_labels(**base, mode="decode"), st.decode_tokens),
        ],
    )
    out.family(
        "num_aborted_requests_total", "counter", "Number of requests aborted.", [(_labels(**tok), st.aborted)]
    )
    if state.cfg.host_pool is not None:
        cache = state.engine.cache
        radix = dict(cache_type="UnifiedRadixCache", dp_rank="0", pp_rank="0", tp_rank="0")
        out.family(
            "evicted_tokens_total",
            "counter",
            "Tokens evicted from the device cache.",
            [(_labels(**radix), cache.evicted_tokens)],
        )
        out.family(
            "load_back_tokens_total",
            "counter",
            "Tokens loaded back from the host pool.",
            [(_labels(**radix, pool="kv"), cache.loaded_back_tokens)],
        )
    tier = state.engine.storage
    if tier is not None:  # 0.5.23's StorageMetricsCollector, created only with a storage backend
        l3 = _labels(storage_backend="file", tp_rank="0", dp_rank="0", pp_rank="0", pp_size="1", attn_cp_rank="0",
                     attn_cp_size="1")
        for name, help_text, value in (
            ("prefetched_tokens_total", "Prompt tokens successfully transferred from L3 storage into host memory, "
             "before admission-time reuse or discard.", tier.prefetched_tokens),
            ("backuped_tokens_total", "Number of backuped tokens.", tier.backuped_tokens),
            ("storage_prefetch_hit_tokens_total", "Storage-hit tokens returned by an L3 query before host "
             "allocation, transfer, or cache insertion.", tier.prefetch_hit_tokens),
        ):
            out.family(name, "counter", help_text, [(l3, value)])
    out.family(
        "http_requests_total",
        "counter",
        "Total HTTP requests.",
        [(_labels(endpoint=p, method=m), v) for (p, m), v in sorted(state.http_requests.items())],
    )
    out.family(
        "http_responses_total",
        "counter",
        "Total HTTP responses.",
        [
            (_labels(endpoint=p, method=m, status_code=c), v)
            for (p, c, m), v in sorted(state.http_responses.items())
        ],
    )


def _histograms(out: PromText, state: State, tok: dict[str, str]) -> None:
    st = state.engine.stats
    base = dict(
        engine_type="unified", model_name=tok["model_name"], moe_ep_rank="0", pp_rank="0", tp_rank="0"
    )
    out.histogram(
        "time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        [({**tok, "is_streaming": s}, h) for s, h in st.ttft.items()],
    )
    out.histogram(
        "e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        [({**tok, "is_streaming": s}, h) for s, h in st.e2e.items()],
    )
    out.histogram(
        "request_time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        [({**tok, "is_streaming": s}, h) for s, h in st.tpot.items()],
    )
    out.histogram(
        "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", [(tok, st.itl)]
    )
    out.histogram("queue_time_seconds", "Histogram of queueing time in seconds.", [(base, st.queue)])
    out.histogram("prompt_tokens_histogram", "Histogram of prompt token length.", [(tok, st.prompt_hist)])
    out.histogram(
        "uncached_prompt_tokens_histogram",
        "Histogram of uncached prompt token length.",
        [(tok, st.uncached_hist)],
    )
    out.histogram(
        "generation_tokens_histogram", "Histogram of generation token length.", [(tok, st.gen_hist)]
    )
