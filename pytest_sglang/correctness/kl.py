"""Logprobs served from the prefix cache agree with the same tokens scored cold (a mean KL estimate).

SGLang's own check (``sglang/test/kl_test_utils.py``, prefill-cache-hit variant): flush the cache,
prefill the prompts, generate with cache hits and logprobs, flush again, re-score prompt + output cold
(``max_new_tokens=0``, ``logprob_start_len=0``), and compare the two logprob lists with the k3
estimator ``exp(r) - 1 - r``, ``r = cold - cached`` (non-negative, ~ r**2 / 2 for small ``r``). Its
CI floors are 0.002-0.02. A memory or cache bug that corrupts cached KV shows up here first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_sglang import ledger
from pytest_sglang.correctness.context import CheckContext
from pytest_sglang.correctness.payload import as_dict, as_list
from pytest_sglang.correctness.prompts import seed_token_ids
from pytest_sglang.correctness.result import CheckReport

PROMPT_TOKENS = 96  # several pages at any page size SGLang uses, so the prefix cache can hit
MIN_HIT_SHARE = 0.5  # SGLang's own assertion: more than half the prompts hit the cache


def k3(cold: Sequence[float], cached: Sequence[float]) -> float:
    """The mean k3 KL estimate over paired token logprobs (0 for identical lists)."""
    if len(cold) != len(cached) or not cold:
        raise ValueError(f"need two equally long, non-empty logprob lists (got {len(cold)} and {len(cached)})")
    return sum(math.expm1(a - b) - (a - b) for a, b in zip(cold, cached, strict=True)) / len(cold)


def _flush(ctx: CheckContext, report: CheckReport) -> bool:
    ledger.note_flush()
    reply = ctx.post("/flush_cache", {})
    return report.expect(reply.status == 200, f"POST /flush_cache: {reply.describe()}")


def _items(ctx: CheckContext, body: dict[str, Any], report: CheckReport, what: str) -> list[dict[str, Any]]:
    reply = ctx.post("/generate", body)
    items = [i for i in reply.body if isinstance(i, dict)] if isinstance(reply.body, list) else []
    report.expect(reply.status == 200 and len(items) == len(body["input_ids"]), f"{what}: {reply.describe()}")
    return items


def _values(entries: object) -> list[float] | None:
    if not isinstance(entries, list):
        return None
    values = [e[0] for e in entries if isinstance(e, list) and e]
    return values if all(isinstance(v, (int, float)) for v in values) and len(values) == len(entries) else None


def _cache_hits(prompts: list[list[int]], hot: list[dict[str, Any]]) -> tuple[list[tuple[list[int], list[float]]], int]:
    """The prompts served from the cache as (prompt + output ids, cached logprobs), and host-tier tokens."""
    pairs: list[tuple[list[int], list[float]]] = []
    host = 0
    for prompt_ids, item in zip(prompts, hot, strict=False):  # a short answer is reported by _items
        meta = as_dict(item.get("meta_info"))
        values, out = _values(meta.get("output_token_logprobs")), item.get("output_ids")
        hosted = as_dict(meta.get("cached_tokens_details")).get("host")
        host += hosted if isinstance(hosted, int) else 0
        if (meta.get("cached_tokens") or 0) > 0 and values and isinstance(out, list) and len(out) == len(values):
            pairs.append((prompt_ids + out, values))
    return pairs, host


def _cold_kls(ctx: CheckContext, pairs: list[tuple[list[int], list[float]]], report: CheckReport) -> list[float]:
    """Re-score every sequence cold and return its KL estimate against the cached logprobs."""
    body = {"input_ids": [p[0] for p in pairs], "sampling_params": {"max_new_tokens": 0, "temperature": 0},
            "return_logprob": True, "logprob_start_len": 0, "return_text_in_logprobs": False}
    kls = []
    for (_, cached), item in zip(pairs, _items(ctx, body, report, "cold re-score"), strict=False):
        meta = as_dict(item.get("meta_info"))
        values = _values(as_list(meta.get("input_token_logprobs"))[1:])  # the first prompt token has none (null)
        if values is None or len(values) < len(cached):
            report.problems.append(f"cold re-score returned {len(values or [])} input logprobs, need {len(cached)}")
            continue
        kls.append(k3(values[-len(cached):], cached))
    return kls


def check_cache_logprobs(ctx: CheckContext) -> CheckReport:
    """Mean KL estimate between cached and cold logprobs of the same tokens stays under ``max_kl``."""
    ctx.features.need_radix_cache()
    report = CheckReport("cached vs cold logprobs (mean KL estimate)")
    count, out_len = ctx.settings.samples, ctx.settings.max_tokens * 2
    prompts = seed_token_ids(ctx.client, count, PROMPT_TOKENS, timeout_s=ctx.settings.request_timeout_s,
                             one_by_one=ctx.features.gateway is not None)
    greedy = {"temperature": 0, "ignore_eos": True}
    if not _flush(ctx, report):
        return report
    _items(ctx, {"input_ids": prompts, "sampling_params": {"max_new_tokens": 0, **greedy}}, report, "prefill")
    hot = _items(ctx, {"input_ids": prompts, "sampling_params": {"max_new_tokens": out_len, **greedy},
                       "return_logprob": True, "return_text_in_logprobs": False}, report, "generate with cache hits")
    pairs, host = _cache_hits(prompts, hot)
    report.figures.update({"prompts": count, "cache hits": len(pairs), "host-tier tokens": host})
    if not report.expect(len(pairs) > MIN_HIT_SHARE * count, f"only {len(pairs)}/{count} prompts were served from "
                                                             "the prefix cache after a prefill (SGLang expects > 50%)"):
        return report
    kls = _cold_kls(ctx, pairs, report) if _flush(ctx, report) else []
    if kls:
        mean = sum(kls) / len(kls)
        report.figures.update({"mean KL": mean, "worst prompt KL": max(kls), "max_kl": ctx.settings.max_kl})
        report.expect(mean <= ctx.settings.max_kl, f"mean KL estimate {mean:.4g} between cached and cold logprobs "
                                                   f"exceeds max_kl {ctx.settings.max_kl:g}")
    return report
