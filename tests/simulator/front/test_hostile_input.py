"""Malformed fields get a 4xx, never a 500 nor a runaway: every feature's options are checked."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.conftest import SimFactory

JUNK: tuple[Any, ...] = ("x", [1], {"a": 1}, -1, 10**12, [{"type": "function", "function": "x"}], {"function": 1})
CHAT = (
    *("max_tokens", "n", "logprobs", "top_logprobs", "tools", "tool_choice", "response_format", "regex", "ebnf"),
    *("messages", "stream_options", "chat_template_kwargs", "stop", "seed", "temperature"),
)
NATIVE = ("sampling_params", "logprob_start_len", "top_logprobs_num", "input_ids")
SAMPLING = ("max_new_tokens", "n", "json_schema", "regex", "ebnf", "stop", "stream_interval", "sampling_seed")


def _bodies() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for value in JUNK:
        for name in CHAT:
            extra = {"logprobs": True} if name == "top_logprobs" else {}
            msg = [{"role": "user", "content": "hi"}]
            out.append(("/v1/chat/completions", {"messages": msg, "max_tokens": 3, **extra, name: value}))
            out.append(("/v1/completions", {"prompt": "hi", "max_tokens": 3, name: value}))
        for name in NATIVE:
            out.append(("/generate", {"text": "hi", "return_logprob": True, name: value}))
        for name in SAMPLING:
            out.append(("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 3, name: value}}))
    return out


def test_no_field_value_makes_a_500(sim_factory: SimFactory) -> None:
    sim = sim_factory("--tool-call-parser", "qwen25", "--reasoning-parser", "qwen3")

    async def go() -> list[tuple[str, dict[str, Any], int]]:
        async with httpx.AsyncClient(base_url=sim.url, timeout=60) as c:
            sem = asyncio.Semaphore(16)

            async def one(path: str, body: dict[str, Any]) -> tuple[str, dict[str, Any], int]:
                async with sem:
                    return path, body, (await c.post(path, json=body)).status_code

            return list(await asyncio.gather(*(one(p, b) for p, b in _bodies())))

    results = asyncio.run(go())
    assert [r for r in results if r[2] >= 500] == []
    assert sum(code == 400 for _, _, code in results) > len(results) // 2  # most junk is refused
