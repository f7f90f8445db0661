"""Helpers of the simulator's correctness tests: SSE reading, shared tools and prompts, and the
two probes the fault tests reuse (a mid-stream disconnect, SGLang's cache-hit KL check)."""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

import httpx

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "unit"],
}
TOOLS = [
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": WEATHER}},
]


def events(client: httpx.Client, path: str, body: dict[str, Any]) -> list[Any]:
    """The ``data:`` payloads of a streamed response (JSON, or the string ``[DONE]``)."""
    out: list[Any] = []
    with client.stream("POST", path, json={**body, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


def deltas(chunks: list[Any], key: str) -> list[Any]:
    """Every ``choices[0].delta[key]`` that is set, in order."""
    return [
        c["choices"][0]["delta"][key]
        for c in chunks
        if isinstance(c, dict) and c.get("choices") and c["choices"][0].get("delta", {}).get(key) is not None
    ]


def chat(client: httpx.Client, content: str, **extra: Any) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": content}], "temperature": 0, **extra}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


SHOTS = "".join(
    f"Question: What is {a} + {b}?\nAnswer: {a} + {b} = {a + b}.\n#### {a + b}\n\n"
    for a, b in ((3, 4), (10, 5), (7, 8))
)


def last_number(text: str) -> str:
    """SGLang's gsm8k harness extraction: the last number in the output."""
    found = re.findall(r"-?\d+\.?\d*", text.replace(",", ""))
    return found[-1] if found else "invalid"


def disconnect_mid_stream(url: str) -> float:
    """Read a few chunks of a long stream, drop the connection, then read ``num_running_reqs``."""
    with httpx.Client(base_url=url, timeout=30) as c:
        body = {"text": "go", "stream": True, "sampling_params": {"max_new_tokens": 5000, "ignore_eos": True}}
        with c.stream("POST", "/generate", json=body) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i > 6:
                    break
    deadline = time.monotonic() + 5
    while True:
        metrics = httpx.get(f"{url}/metrics").text
        value = float(re.search(r"^sglang:num_running_reqs\{.*\} (\S+)$", metrics, re.M).group(1))  # type: ignore[union-attr]
        if value == 0.0 or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def _native(c: httpx.Client, ids: list[int], new: int, **extra: Any) -> dict[str, Any]:
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": new, "temperature": 0, "ignore_eos": True}}
    result: dict[str, Any] = c.post("/generate", json={**body, **extra}).json()
    return result


def kl_check(url: str) -> tuple[int, float]:
    """SGLang's cache-hit KL check (kl_test_utils): (cached tokens of the hit, mean k3 estimate)."""
    prompt = list(range(2000, 2060))
    with httpx.Client(base_url=url, timeout=30) as c:
        c.post("/flush_cache")
        _native(c, prompt, 0)  # prefill: the prompt goes into the radix cache
        hit = _native(c, prompt, 24, return_logprob=True)
        out = [row[0] for row in hit["meta_info"]["output_token_logprobs"]]
        c.post("/flush_cache")
        cold = _native(c, prompt + hit["output_ids"], 0, return_logprob=True, logprob_start_len=0)
    again = [row[0] for row in cold["meta_info"]["input_token_logprobs"]][-len(out) :]
    k3 = [math.exp(a - b) - 1 - (a - b) for a, b in zip(again, out, strict=True)]
    return hit["meta_info"]["cached_tokens"], sum(k3) / len(k3)
