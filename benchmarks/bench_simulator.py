"""Streamed tokens per server CPU-second: the simulator vs a bare aiohttp.web server.

Both servers stream the same event bytes (the bare one replays chunks recorded from the simulator)
to 64 concurrent streams; server CPU time is read with psutil on the server process. Prints both
figures and the ratio side by side. Target: simulator CPU per token <= 2x the bare server's.

    python benchmarks/bench_simulator.py [--streams 64] [--tokens 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time

import aiohttp
import psutil

from pytest_sglang.simulator import Simulator, free_port

BARE = r"""
import asyncio, json, sys
from aiohttp import web
chunks = [c.encode() for c in json.load(open(sys.argv[1]))]
step = float(sys.argv[3])
async def generate(request):
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await resp.prepare(request)
    for c in chunks:
        await asyncio.sleep(step)
        await resp.write(c)
    await resp.write_eof()
    return resp
async def health(request):
    return web.Response()
app = web.Application()
app.router.add_post("/generate", generate)
app.router.add_get("/health", health)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None, access_log=None)
"""


async def _stream(session: aiohttp.ClientSession, url: str, body: dict[str, object]) -> int:
    events = 0
    async with session.post(url, json=body) as resp:
        async for line in resp.content:
            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                events += 1
    return events


async def _load(url: str, streams: int, tokens: int, rounds: int) -> int:
    total = 0
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as s:
        for r in range(rounds):
            bodies = [
                {
                    "input_ids": [r * 1000 + i] * 16,
                    "stream": True,
                    "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
                }
                for i in range(streams)
            ]
            counts = await asyncio.gather(*(_stream(s, f"{url}/generate", b) for b in bodies))
            total += sum(counts)
    return total


def _measure(pid: int, url: str, streams: int, tokens: int, rounds: int) -> tuple[float, int, float]:
    proc = psutil.Process(pid)
    before = proc.cpu_times()
    t0 = time.perf_counter()
    events = asyncio.run(_load(url, streams, tokens, rounds))
    wall = time.perf_counter() - t0
    after = proc.cpu_times()
    cpu = (after.user - before.user) + (after.system - before.system)
    return cpu, events, wall


def _record_chunks(url: str, tokens: int) -> list[str]:
    async def run() -> list[str]:
        async with aiohttp.ClientSession() as s:
            body = {
                "input_ids": [7] * 16,
                "stream": True,
                "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
            }
            async with s.post(f"{url}/generate", json=body) as resp:
                raw = (await resp.read()).decode()
        return [part + "\n\n" for part in raw.split("\n\n") if part]

    return asyncio.run(run())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--step-ms", type=float, default=2.0, help="decode step time of both servers")
    a = p.parse_args()
    sim_args = [
        "--model-path",
        "sim/tiny-llama",
        "--sim-profile",
        "tiny",
        "--sim-time-scale",
        "1",
        "--skip-server-warmup",
        "--log-level",
        "warning",
        "--sim-decode-step-ms",
        str(a.step_ms),
        "--sim-decode-step-per-req-ms",
        "0",
        "--max-running-requests",
        str(a.streams),
    ]
    with Simulator(sim_args, timeout_s=60) as sim:
        assert sim.proc is not None
        chunks = _record_chunks(sim.url, a.tokens)
        s_cpu, s_events, s_wall = _measure(sim.proc.pid, sim.url, a.streams, a.tokens, a.rounds)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(chunks, f)
    port = free_port()
    with tempfile.TemporaryFile() as log:
        bare = subprocess.Popen(
            [sys.executable, "-c", BARE, f.name, str(port), str(a.step_ms / 1000)], stdout=log, stderr=log
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    with psutil.Process(bare.pid).oneshot():
                        pass
                    asyncio.run(_ping(url))
                    break
                except (aiohttp.ClientError, OSError):
                    time.sleep(0.05)
            b_cpu, b_events, b_wall = _measure(bare.pid, url, a.streams, a.tokens, a.rounds)
        finally:
            bare.terminate()
            bare.wait()
    sim_rate, bare_rate = s_events / max(s_cpu, 1e-9), b_events / max(b_cpu, 1e-9)
    print(
        f"{a.streams} concurrent streams x {a.tokens} tokens x {a.rounds} rounds, decode step {a.step_ms} ms"
    )
    print(f"{'server':<12}{'tokens':>10}{'cpu s':>10}{'wall s':>10}{'tok/cpu-s':>14}{'us/token':>11}")
    for name, ev, cpu, wall, rate in (
        ("simulator", s_events, s_cpu, s_wall, sim_rate),
        ("bare", b_events, b_cpu, b_wall, bare_rate),
    ):
        print(f"{name:<12}{ev:>10}{cpu:>10.2f}{wall:>10.2f}{rate:>14,.0f}{1e6 / rate:>11.1f}")
    ratio = bare_rate / sim_rate
    print(
        f"simulator CPU per token = {ratio:.2f}x bare (target <= 2.0x); "
        f"simulator {'meets' if sim_rate >= 100_000 else 'misses'} 100,000 tok/cpu-s"
    )
    return 0


async def _ping(url: str) -> None:
    async with aiohttp.ClientSession() as s, s.get(f"{url}/health") as r:
        await r.read()


if __name__ == "__main__":
    sys.exit(main())
