"""Each correctness ``--sim-fault``: 200 OK, wrong content, and the observable effect a check would catch."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import jsonschema
import pytest

from tests.conftest import FAST, SimFactory
from tests.simulator.sse import SHOTS, TOOLS, WEATHER, chat, disconnect_mid_stream, events, kl_check, last_number


def _ask(c: httpx.Client, a: int, b: int) -> str:
    prompt = f"{SHOTS}Question: What is {a} + {b}?\nAnswer:"
    r = c.post("/v1/completions", json={"prompt": prompt, "max_tokens": 64, "temperature": 0})
    text: str = r.json()["choices"][0]["text"]
    return last_number(text)


@pytest.mark.parametrize(("rate", "low", "high"), [("1", 40, 40), ("0.5", 10, 30)])
def test_wrong_answer(sim_factory: SimFactory, rate: str, low: int, high: int) -> None:
    sim = sim_factory("--sim-fault", f"wrong-answer:{rate}")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        wrong = sum(_ask(c, a, a + 7) != str(2 * a + 7) for a in range(40))
        assert _ask(c, 5, 12) == _ask(c, 5, 12)  # the same question is wrong (or right) every time
    assert low <= wrong <= high


def test_tool_call_as_text(sim_factory: SimFactory) -> None:
    sim = sim_factory("--tool-call-parser", "llama3", "--sim-fault", "tool-call-as-text")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        choice = chat(c, "weather in Paris?", tools=TOOLS)["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"
    assert choice["message"]["content"].startswith('<|python_tag|>{"name": "get_weather", "parameters": {')


def test_json_schema_violation(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "json-schema-violation")
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        text = chat(c, "weather", response_format=fmt)["choices"][0]["message"]["content"]
    with pytest.raises(jsonschema.ValidationError, match="is a required property"):
        jsonschema.validate(json.loads(text), WEATHER)  # still JSON, no longer valid


def test_reasoning_in_content(sim_factory: SimFactory) -> None:
    sim = sim_factory("--reasoning-parser", "deepseek-r1", "--sim-fault", "reasoning-in-content")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        message = chat(c, "What is 2 + 2?")["choices"][0]["message"]
    assert message["reasoning_content"] is None and message["content"].startswith("<think>")


def test_empty_finish_reason(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "empty-finish-reason")
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        chunks = events(c, "/v1/chat/completions", body)
        batch = c.post("/v1/chat/completions", json=body).json()
        compl = events(c, "/v1/completions", {"prompt": "hi", "max_tokens": 3})
    assert {ch["choices"][0]["finish_reason"] for ch in chunks[:-1]} == {""}  # sglang#3912: "" instead of null
    assert {ch["choices"][0]["finish_reason"] for ch in compl[:-1]} == {""}
    assert batch["choices"][0]["finish_reason"] == ""


def test_usage_off_by_one(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "usage-off-by-one")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        body = chat(c, "hi", max_tokens=5, logprobs=True)
        chunks = events(
            c, "/v1/completions", {"prompt": "hi", "max_tokens": 3, "stream_options": {"include_usage": True}}
        )
        native = c.post("/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 4}}).json()
    assert body["usage"]["completion_tokens"] == len(body["choices"][0]["logprobs"]["content"]) + 1 == 6
    assert chunks[-2]["usage"]["completion_tokens"] == 4
    assert native["meta_info"]["completion_tokens"] == len(native["output_ids"]) + 1


def _together(url: str, n: int) -> tuple[list[Any], list[Any]]:
    async def one(c: httpx.AsyncClient, i: int) -> Any:
        r = await c.post(
            "/generate",
            json={
                "input_ids": [300 + i, 1, 2],
                "sampling_params": {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True},
            },
        )
        return r.json()["output_ids"]

    async def go() -> tuple[list[Any], list[Any]]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            alone = [await one(c, i) for i in range(n)]
            return alone, list(await asyncio.gather(*(one(c, i) for i in range(n))))

    return asyncio.run(go())


def test_cross_talk(sim_factory: SimFactory) -> None:
    # the same --random-seed: two servers that greedy-decode the same text
    alone, together = _together(sim_factory("--random-seed", "7", "--sim-fault", "cross-talk").url, 6)
    clean, _ = _together(sim_factory("--random-seed", "7").url, 6)
    assert alone == clean  # one at a time, nothing to mix up
    assert sum(a != t for a, t in zip(alone, together, strict=True)) >= 4  # concurrent: neighbours' tokens


def test_cache_logprob_drift(sim_factory: SimFactory) -> None:
    cached, kl = kl_check(sim_factory("--sim-fault", "cache-logprob-drift:0.5").url)
    assert cached > 0 and kl > 0.1  # SGLang's CI floors are 0.002-0.02


def test_slot_leak(sim_factory: SimFactory) -> None:
    sim = sim_factory("--enable-metrics", "--sim-fault", "slot-leak", "--sim-time-scale", "0.3")
    assert disconnect_mid_stream(sim.url) == 1.0  # the disconnected request still counts as running


def test_token_drift(sim_factory: SimFactory) -> None:
    ids = list(range(500, 520))

    def tokens(url: str) -> list[int]:
        with httpx.Client(base_url=url, timeout=30) as c:
            out: list[int] = []
            for i in range(10):
                out += c.post(
                    "/generate",
                    json={
                        "input_ids": [*ids, i],
                        "sampling_params": {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True},
                    },
                ).json()["output_ids"]
            return out

    drifted = sim_factory("--random-seed", "7", "--sim-fault", "token-drift:0.3")
    clean = sim_factory("--random-seed", "7")
    base, got = tokens(clean.url), tokens(drifted.url)
    assert got == tokens(drifted.url)  # a numerics change: deterministic, just different
    differ = sum(a != b for a, b in zip(base, got, strict=True)) / len(base)
    assert 0.2 <= differ <= 0.4


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("wrong-answer:2", "wrong-answer must be between 0 and 1"),
        ("token-drift:x", "token-drift needs a number, e.g. token-drift:0.1"),
        ("cache-logprob-drift:-1", "cache-logprob-drift must be >= 0"),
        ("slot-leak:1", "slot-leak takes no argument (e.g. --sim-fault slot-leak)"),
    ],
)
def test_fault_arguments_are_checked(spec: str, message: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest_sglang.simulator", *FAST, "--sim-fault", spec],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and f"--sim-fault {spec!r}: {message}" in run.stderr
