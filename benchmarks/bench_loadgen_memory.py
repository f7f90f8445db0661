"""Load generator memory: peak RSS of ``run_load`` at fixed concurrency for N and 100*N requests.

Before the bounded design, every prompt and task was built up front (20.7 GB for 10**9 requests) and
every record kept. Now prompts are built as requests start, at most ``concurrency`` requests exist
at a time, and records beyond ``max_records`` are a uniform sample: the peak must stay flat (about
1x) when ``requests`` grows 100x. Each run happens in a fresh interpreter (its own peak), against a
fast fake SGLang server in another process (streams ``output_len`` tokens with no delay), so the
figures are the client's alone.

Run: ``python benchmarks/bench_loadgen_memory.py [--requests 1000 --concurrency 32 --max-records 1000]``.
``--max-records`` is small here so that both runs are past the cap; the default cap (100,000 records)
gives the same flat curve beyond 100,000 requests.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
from typing import Any

MB = 1e6


def serve(port: int) -> None:
    """A fake /generate that streams SGLang's cumulative chunks as fast as it can."""
    from aiohttp import web

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="")

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        want = body["sampling_params"]["max_new_tokens"]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        for n in range(1, want + 1):
            fr = {"type": "length", "length": n} if n == want else None
            chunk = {"text": "x" * n, "output_ids": list(range(n)),
                     "meta_info": {"completion_tokens": n, "prompt_tokens": 8, "finish_reason": fr}}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_post("/generate", generate)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, handle_signals=True)


def client(url: str, requests: int, concurrency: int, max_records: int) -> dict[str, Any]:
    """One measured run in this (fresh) process: peak RSS over the run, sampled every 10 ms."""
    import psutil

    from pytest_sglang.loadgen import LoadSpec, run_load

    shape = dict(concurrency=concurrency, input_len=8, output_len=2, warmup=0, sample_server_metrics=False,
                 max_records=max_records)
    run_load(url, LoadSpec(requests=2 * concurrency, **shape))  # imports and first allocations done
    me = psutil.Process()
    before = me.memory_info().rss
    peak = [before]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.perf_counter()
    result = run_load(url, LoadSpec(requests=requests, **shape))
    wall = time.perf_counter() - started
    done.set()
    watcher.join()
    peak[0] = max(peak[0], me.memory_info().rss)
    return {"requests": requests, "completed": result.completed, "failed": result.failed, "wall_s": wall,
            "baseline_mb": before / MB, "peak_mb": peak[0] / MB, "growth_mb": (peak[0] - before) / MB,
            "kept": len(result.records), "sample": result.percentile_sample}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"fake server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("fake server not healthy after 60 s")


def measure(url: str, requests: int, args: argparse.Namespace, max_records: int) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--client", url, "--requests", str(requests),
            "--concurrency", str(args.concurrency), "--max-records", str(max_records)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=3600)
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=1000, help="N (the large run is 100*N)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--max-records", type=int, default=1000)
    p.add_argument("--default-cap", action="store_true", help="also run 100*N with max_records=100,000")
    p.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    p.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.client:
        print(json.dumps(client(args.client, args.requests, args.concurrency, args.max_records)))
        return
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        runs = [measure(url, args.requests, args, args.max_records),
                measure(url, 100 * args.requests, args, args.max_records)]
        if args.default_cap:
            runs.append(measure(url, 100 * args.requests, args, 100_000))
    finally:
        server.terminate()
        server.wait(10)
    print(f"bench_loadgen_memory: concurrency {args.concurrency}, input_len 8, output_len 2, fake server; "
          f"peak RSS of a fresh client process over the run")
    print(f"{'requests':>10} {'max_records':>11} {'wall s':>8} {'req/s':>8} {'kept':>7} "
          f"{'baseline MB':>12} {'peak MB':>8} {'growth MB':>10}")
    caps = [args.max_records, args.max_records, 100_000][: len(runs)]
    for run, cap in zip(runs, caps, strict=True):
        print(f"{run['requests']:>10,} {cap:>11,} {run['wall_s']:>8.1f} {run['completed'] / run['wall_s']:>8.0f} "
              f"{run['kept']:>7,} {run['baseline_mb']:>12.1f} {run['peak_mb']:>8.1f} {run['growth_mb']:>10.1f}")
    small, large = runs[0], runs[1]
    print(f"peak RSS ratio {large['requests']:,} / {small['requests']:,} requests: "
          f"{large['peak_mb'] / small['peak_mb']:.2f}x (target about 1x); growth over the warm baseline: "
          f"{small['growth_mb']:.1f} MB -> {large['growth_mb']:.1f} MB")
    for run in runs:
        if run["failed"]:
            print(f"warning: {run['failed']} of {run['requests']} requests failed")


if __name__ == "__main__":
    main()
