"""Streaming contracts, incl. SGLang bench_serving's (reference §12.1), and the trace file."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import SimFactory


def events(client: httpx.Client, path: str, body: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    with client.stream("POST", path, json=body) as r:
        assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_bench_serving_contract(sim_factory: SimFactory, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    sim = sim_factory("--enable-cache-report", "--sim-trace", str(trace))
    with httpx.Client(base_url=sim.url) as c:
        assert c.get("/v1/models").status_code == 200
        native = events(
            c,
            "/generate",
            {
                "input_ids": list(range(1000, 1050)),
                "stream": True,
                "sampling_params": {"max_new_tokens": 12, "ignore_eos": True},
            },
        )
        assert native[-1] == "[DONE]"
        chunks = native[:-1]
        for prev, cur in itertools.pairwise(chunks):
            assert cur["text"].startswith(prev["text"])  # cumulative text
        assert [ch["meta_info"]["completion_tokens"] for ch in chunks] == list(range(1, 13))
        assert chunks[-1]["meta_info"]["prompt_tokens"] == 50
        comp = events(
            c,
            "/v1/completions",
            {"prompt": "Once upon a time", "max_tokens": 10, "stream": True, "ignore_eos": True},
        )
        assert comp[-1] == "[DONE]" and all(ev["choices"] for ev in comp[:-1])  # no usage-only chunk
        assert "".join(ev["choices"][0]["text"] for ev in comp[:-1]).count(" ") == 10
        assert comp[-2]["choices"][0]["finish_reason"] == "length"
        with_usage = events(
            c,
            "/v1/completions",
            {
                "prompt": "Once upon a time",
                "max_tokens": 10,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
        assert with_usage[-2]["choices"] == [] and with_usage[-2]["usage"]["completion_tokens"] == 10
        assert with_usage[-2]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
        chat = events(
            c,
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": True},
        )
        assert chat[0]["choices"][0]["delta"] == {
            "reasoning_content": None,
            "role": "assistant",
            "content": "",
        }
        assert chat[-2]["choices"][0]["delta"] == {"reasoning_content": None}
        assert chat[-2]["choices"][0]["finish_reason"] == "length" and "usage" not in chat[1]
        assert sum(1 for ev in chat[1:-2] if ev["choices"][0]["delta"].get("content")) == 5
    sim.stop()
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [r["event"] for r in records[:2]] == ["port_open", "server_up"]
    req = next(r for r in records if r.get("endpoint") == "/generate")
    assert req["completion_tokens"] == 12 and len(req["chunk_perf"]) == 12
    assert req["arrival_perf"] <= req["first_token_perf"] <= req["last_token_perf"] <= req["chunk_perf"][-1]


def test_queueing_and_throughput_rise_with_concurrency(sim_factory: SimFactory) -> None:
    sim = sim_factory(
        "--max-running-requests",
        "2",
        "--sim-time-scale",
        "1",
        "--sim-decode-step-ms",
        "5",
        "--sim-decode-step-per-req-ms",
        "0",
    )
    import asyncio
    import time

    async def one(c: httpx.AsyncClient, i: int) -> float:
        r = await c.post(
            "/generate",
            json={"input_ids": [i] * 5, "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}},
        )
        assert r.json()["meta_info"]["completion_tokens"] == 20
        return time.perf_counter()

    async def run(n: int) -> float:
        async with httpx.AsyncClient(base_url=sim.url, timeout=30) as c:
            t0 = time.perf_counter()
            await asyncio.gather(*(one(c, i) for i in range(n)))
            return time.perf_counter() - t0

    one_req, four = asyncio.run(run(1)), asyncio.run(run(4))
    # 2 running at a time: 4 requests take ~2 rounds, so clearly longer than 1 but < 4 sequential ones.
    assert 1.5 * one_req < four < 4 * one_req
