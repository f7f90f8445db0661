"""Load generator: client cost and accuracy, printed side by side.

(a) SSE events consumed per client CPU-second: ``run_load`` (httpx API on the aiohttp transport, with
    all of its bookkeeping) vs a bare aiohttp client (line iteration + json.loads) on the same
    simulator stream. Target: ratio >= 0.9.
(b) accuracy of the client's measurements of events, at 64 concurrent streams: per request, the
    client's absolute receive time of each token chunk (its wall-clock send time ``start_time`` +
    ``ttft`` + the ``itl`` gaps) vs the simulator's absolute send time of that chunk in
    ``--sim-trace`` (``chunk_time``; same machine, same clock). TTFT error = |(client_first -
    client_start) - (server_first_send - client_start)| = |client_first - server_first_send|; the
    client's own send time is the start on both sides because the server's arrival time excludes
    connection set-up and event-loop queueing that the user does see. ITL error per chunk =
    |receive - send| (and, for reference, the error of the gap itself). Target: median <= 1 ms.

Run: ``python benchmarks/bench_loadgen.py [--requests 256 --concurrency 64 --output-len 256]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.client.streams import request_body
from pytest_sglang.loadgen.prompts.datasets import build_prompts


@dataclass
class Measured:
    """One client's view of one request: wall-clock send time, TTFT, gaps between chunks (seconds)."""

    rid: str
    start_time: float
    ttft: float
    gaps: list[float] = field(default_factory=list)

    def receive_times(self) -> list[float]:
        """Absolute receive time of each chunk (one token per chunk in this benchmark)."""
        t = self.start_time + self.ttft
        out = [t]
        for g in self.gaps:
            t += g
            out.append(t)
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_simulator(trace: Path, log: Path, step_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "pytest_sglang.simulator",
        "--model-path",
        "tiny",
        "--port",
        str(port),
        "--sim-time-scale",
        "1",
        "--sim-decode-step-ms",
        str(step_ms),
        "--sim-decode-step-per-req-ms",
        "0",
        "--sim-trace",
        str(trace),
    ]
    with log.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"simulator exited with {proc.returncode}; see {log}")
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"simulator not healthy after 120 s; see {log}")


async def bare_client(url: str, spec: LoadSpec) -> tuple[list[Measured], int]:
    """The reference: aiohttp line iteration, json.loads per data line, perf_counter per line."""
    prompts = build_prompts(spec)
    sem = asyncio.Semaphore(spec.concurrency or len(prompts))
    events = 0
    out: list[Measured] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> None:
            nonlocal events
            body = request_body(spec, prompts[i])
            async with sem:
                st = time.perf_counter()
                wall = time.time()
                first, last, rid, gaps = 0.0, 0.0, "", []
                async with session.post(url + "/generate", json=body) as resp:
                    async for line in resp.content:
                        t = time.perf_counter()
                        if not line.startswith(b"data:"):
                            continue
                        events += 1
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            continue
                        data = json.loads(payload)
                        if data.get("text"):
                            if not first:
                                first, rid = t, data["meta_info"]["id"]
                            else:
                                gaps.append(t - last)
                            last = t
                out.append(Measured(rid, wall, first - st, gaps))

        await asyncio.gather(*(one(i) for i in range(len(prompts))))
    return out, events


def loadgen_client(url: str, spec: LoadSpec) -> tuple[list[Measured], int]:
    result = run_load(url, spec)
    if result.failed:
        raise SystemExit(f"load generator run had failures: {result.errors} {result.failure_examples()}")
    events = sum(r.chunks + 1 for r in result.records)  # + the [DONE] line
    # One token per chunk here (stream_interval 1), so native per-token ITL == per-chunk gap.
    return [Measured(r.rid or "", r.start_time, r.ttft, list(r.itl)) for r in result.records], events


def read_trace(path: Path) -> dict[str, dict[str, Any]]:
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {r["rid"]: r for r in rows if r.get("event") == "request" and r.get("stream")}


@dataclass
class Errors:
    """Absolute errors (seconds) of one client's measurements vs the trace."""

    ttft: list[float] = field(default_factory=list)
    chunk: list[float] = field(default_factory=list)  # |receive - send| per chunk after the first
    gap: list[float] = field(default_factory=list)  # |measured gap - sent gap|
    lag: list[float] = field(default_factory=list)  # signed receive - send, every chunk
    #: client send -> server arrival: connection set-up, writing, the server's accept queue
    arrive: list[float] = field(default_factory=list)


def errors_vs_truth(measured: list[Measured], truth: dict[str, dict[str, Any]]) -> Errors:
    err = Errors()
    for m in measured:
        t = truth.get(m.rid)
        if t is None or not t["chunk_time"]:
            continue
        sent, got = t["chunk_time"], m.receive_times()
        if len(sent) != len(got):
            continue  # not one token per chunk: cannot be matched chunk by chunk
        lags = [g - s for g, s in zip(got, sent, strict=True)]
        err.ttft.append(abs(lags[0]))
        err.chunk += [abs(x) for x in lags[1:]]
        err.gap += [abs(b - a) for a, b in itertools.pairwise(lags)]
        err.lag += lags
        err.arrive.append(t["arrival_time"] - m.start_time)
    return err


def _ms(values: list[float], pct: int) -> str:
    if len(values) < 2:
        return "n/a"
    v = statistics.median(values) if pct == 50 else statistics.quantiles(values, n=100)[pct - 1]
    return f"{v * 1e3:.3f}"


def _loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_run(fn: Any) -> tuple[Any, float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    value = fn()
    return value, time.process_time() - cpu0, time.perf_counter() - wall0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--step-ms", type=float, default=5.0, help="simulated decode step (ms)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds per client; best is shown")
    args = ap.parse_args()
    spec = LoadSpec(
        requests=args.requests,
        concurrency=args.concurrency,
        input_len=args.input_len,
        output_len=args.output_len,
        warmup=0,
        sample_server_metrics=False,
    )
    load0 = _loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        trace, log = Path(tmp) / "trace.jsonl", Path(tmp) / "sim.log"
        proc, url = start_simulator(trace, log, args.step_ms)
        try:
            runs: dict[str, list[tuple[float, float, list[Measured]]]] = {"loadgen": [], "bare aiohttp": []}
            for _ in range(args.rounds):
                (m, ev), cpu, wall = cpu_run(lambda: loadgen_client(url, spec))
                runs["loadgen"].append((ev / cpu, wall, m))
                (m, ev), cpu, wall = cpu_run(lambda: asyncio.run(bare_client(url, spec)))
                runs["bare aiohttp"].append((ev / cpu, wall, m))
            time.sleep(0.5)  # let the trace file catch up
            truth = read_trace(trace)
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        f"bench_loadgen: {args.requests} requests, {args.concurrency} concurrent streams, "
        f"{args.output_len} tokens each, simulated decode step {args.step_ms} ms, "
        f"load average before/after {load0} / {_loadavg()}"
    )
    print(
        f"{'client':<14} {'events/CPU-s':>13} {'wall s':>7} {'TTFT med|err|':>14} {'TTFT p99|err|':>14} "
        f"{'ITL med|err|':>13} {'ITL p99|err|':>13} {'gap med|err|':>13} {'min lag':>8} {'send->arr':>9}  (ms)"
    )
    best: dict[str, float] = {}
    errs: dict[str, Errors] = {}
    for name, rows in runs.items():
        rate, _, _ = max(rows, key=lambda r: r[0])
        wall = statistics.median(r[1] for r in rows)
        best[name] = rate
        e = errs[name] = errors_vs_truth([m for _, _, ms in rows for m in ms], truth)
        print(
            f"{name:<14} {rate:>13,.0f} {wall:>7.2f} {_ms(e.ttft, 50):>14} {_ms(e.ttft, 99):>14} "
            f"{_ms(e.chunk, 50):>13} {_ms(e.chunk, 99):>13} {_ms(e.gap, 50):>13} "
            f"{min(e.lag) * 1e3:>8.3f} {_ms(e.arrive, 50):>9}"
        )
    ratio = best["loadgen"] / best["bare aiohttp"]
    print(
        f"(a) client efficiency loadgen / bare aiohttp: {ratio:.2f}x (target >= 0.9x): "
        f"{'ok' if ratio >= 0.9 else 'MISSED'}"
    )
    lg = errs["loadgen"]
    ok_b = statistics.median(lg.ttft) <= 1e-3 and statistics.median(lg.chunk) <= 1e-3
    print(
        f"(b) loadgen median |receive - send| vs --sim-trace: TTFT {_ms(lg.ttft, 50)} ms, "
        f"ITL {_ms(lg.chunk, 50)} ms over {len(lg.ttft)} requests (target <= 1 ms): "
        f"{'ok' if ok_b else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
