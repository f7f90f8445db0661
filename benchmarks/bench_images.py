"""Image loads: the load generator's figures vs ``sglang.bench_serving --dataset-name image``, same server.

Both clients send the same options (image count, resolution, format, content; text and answer lengths;
concurrency; requests) to one server, one after the other, and the figures are printed side by side
with their ratio (ours / bench_serving). Goal: every ratio within 15 % of 1.

The server is ``--url`` (e.g. real SGLang 0.5.23 serving the tiny Qwen2-VL of the real tier), or else
the simulator started here with ``--sim-vision qwen2-vl``. bench_serving runs in the real-SGLang venv
(``$REAL_SGLANG_PYTHON``) and reads the tiny Qwen2-VL's processor (``$REAL_SGLANG_VLM_MODEL``) to build
its prompts; bash scripts/real-sglang/setup.sh provides both.

Our load uses a pool of ``requests x count`` images, so every request's images are new, as
bench_serving's are (a repeated image would be served from the server's multimodal cache).

Run: ``python benchmarks/bench_images.py [--url URL] [--requests 32 --concurrency 4 --image-count 2
--image-resolution 360p --backend sglang-oai-chat]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.client.servermetrics import parse_cache
from pytest_sglang.sglang.vision import QWEN2_VL
from pytest_sglang.sockets import free_port

#: Figures both clients report, under bench_serving's JSON keys.
FIGURES = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_e2e_latency_ms", "mean_itl_ms",
           "request_throughput", "output_throughput")
#: What the server saw of each client's requests (not a goal: the cause of a figure's difference).
INPUTS = ("server_prompt_tokens", "server_ttft_ms", "server_e2e_ms")
GOAL = 0.15


def start_simulator(model: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [sys.executable, "-m", "pytest_sglang.simulator", "--model-path", model, "--port", str(port),
            "--sim-vision", "qwen2-vl", "--sim-time-scale", "1", "--enable-metrics"]
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


def ours(url: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    api = "chat" if args.backend == "sglang-oai-chat" else "native"
    options = (f"image:count={args.image_count},resolution={args.image_resolution},format={args.image_format},"
               f"content={args.image_content},pool={min(256, args.requests * args.image_count)}")
    if api == "native":
        options += f",image_token={QWEN2_VL.placeholder}"
    spec = LoadSpec(requests=args.requests, concurrency=args.concurrency, input_len=args.input_len,
                    output_len=args.output_len, api=api, dataset=options, model=args.served_model, seed=seed)
    result = run_load(url, spec)
    out = {k: v for k, v in result.to_dict().items() if k in FIGURES}
    out["completed"] = result.completed
    out["images"] = result.images
    return out


def bench_serving(url: str, args: argparse.Namespace, python: str, model: str, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.jsonl"
        cmd = [python, "-m", "sglang.bench_serving", "--backend", args.backend, "--base-url", url,
               "--model", model, "--tokenizer", model, "--dataset-name", "image",
               "--image-count", str(args.image_count), "--image-resolution", args.image_resolution,
               "--image-format", args.image_format, "--image-content", args.image_content,
               "--num-prompts", str(args.requests), "--max-concurrency", str(args.concurrency),
               "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
               "--random-range-ratio", "1", "--output-file", str(out), "--disable-tqdm", "--seed", str(seed)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if run.returncode != 0 or not out.exists():
            raise SystemExit(f"bench_serving failed (rc {run.returncode}):\n{run.stderr[-3000:]}")
        data = json.loads(out.read_text().splitlines()[-1])
    figures = {k: data.get(k) for k in FIGURES}
    figures["completed"] = data.get("completed")
    return figures


#: Server-side histograms (sum, count) whose means tell the server's time from the client's.
_HISTOGRAMS = {"server_ttft_ms": "sglang:time_to_first_token_seconds",
               "server_e2e_ms": "sglang:e2e_request_latency_seconds"}


def server_counters(url: str) -> dict[str, float] | None:
    """The server's own counters (the same for both clients): prompt tokens, histogram sums and counts."""
    try:
        reply = httpx.get(url + "/metrics", timeout=10)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    out = {"prompt_tokens": parse_cache(reply.text)[1]}
    for key, name in _HISTOGRAMS.items():
        for part in ("sum", "count"):
            found = re.findall(rf"^{re.escape(name)}_{part}(?:{{[^}}]*}})?\s+([0-9.eE+-]+)", reply.text, re.MULTILINE)
            out[f"{key}_{part}"] = sum(float(v) for v in found)
    return out


def counted(run: Any, url: str, requests: int) -> dict[str, Any]:
    """``run()``'s figures plus what the server measured of the same run (its warmup request included)."""
    before = server_counters(url)
    figures: dict[str, Any] = run()
    after = server_counters(url)
    if before is not None and after is not None:
        figures["server_prompt_tokens"] = (after["prompt_tokens"] - before["prompt_tokens"]) / (requests + 1)
        for key in _HISTOGRAMS:
            n = after[f"{key}_count"] - before[f"{key}_count"]
            if n > 0:
                figures[key] = 1000 * (after[f"{key}_sum"] - before[f"{key}_sum"]) / n
    return figures


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (other keys from the last round)."""
    out = dict(runs[-1])
    for key in (*FIGURES, *INPUTS):
        values = sorted(r[key] for r in runs if isinstance(r.get(key), (int, float)))
        if values:
            out[key] = statistics.median(values)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", help="server to load (default: the simulator with --sim-vision qwen2-vl)")
    p.add_argument("--backend", default="sglang-oai-chat", choices=("sglang-oai-chat", "sglang"))
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--image-count", type=int, default=2)
    p.add_argument("--image-resolution", default="360p")
    p.add_argument("--image-format", default="jpeg")
    p.add_argument("--image-content", default="random")
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2, help="runs of each client, alternating; medians printed")
    p.add_argument("--served-model", default="default", help="the model name the chat API is sent")
    args = p.parse_args()
    python = os.environ.get("REAL_SGLANG_PYTHON")
    model = os.environ.get("REAL_SGLANG_VLM_MODEL")
    if not python or not model or not Path(model, "config.json").exists():
        raise SystemExit("needs REAL_SGLANG_PYTHON and REAL_SGLANG_VLM_MODEL (bash scripts/real-sglang/setup.sh)")
    proc = None
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url
        if url is None:
            proc, url = start_simulator(model, Path(tmp) / "sim.log")
        try:
            runs: dict[str, list[dict[str, Any]]] = {"ours": [], "theirs": []}
            for n in range(args.rounds):  # alternating (ABBA...): a machine's drift falls on both sides
                order = ("theirs", "ours") if n % 2 == 0 else ("ours", "theirs")
                for side in order:
                    # A new seed per run: new images (a server's multimodal cache must not serve a later run)
                    one = (functools.partial(bench_serving, url, args, python, model, 100 + n) if side == "theirs"
                           else functools.partial(ours, url, args, 200 + n))
                    runs[side].append(counted(one, url, args.requests))
            mine, theirs = median_of(runs["ours"]), median_of(runs["theirs"])
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
    print(f"server {'simulator (qwen2-vl)' if proc else url}; backend {args.backend}; {args.requests} requests, "
          f"concurrency {args.concurrency}, {args.image_count} x {args.image_resolution} {args.image_format} "
          f"({args.image_content}), input {args.input_len}, output {args.output_len}; median of {args.rounds} "
          "alternating runs each")
    print(f"{'figure':<24}{'pytest-sglang':>16}{'bench_serving':>16}{'ratio':>9}")
    worst = 0.0
    for key in FIGURES:
        a, b = mine.get(key), theirs.get(key)
        ratio = a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else float("nan")
        if ratio == ratio:
            worst = max(worst, abs(ratio - 1))
        print(f"{key:<24}{a if a is not None else '-':>16.2f}{b if b is not None else float('nan'):>16.2f}"
              f"{ratio:>9.3f}")
    for key in INPUTS:
        a, b = mine.get(key), theirs.get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
            print(f"{key:<24}{a:>16.1f}{b:>16.1f}{a / b:>9.3f}  (mean per request, the server's /metrics)")
    print(f"completed: {mine['completed']} / {theirs['completed']}; our image figures: {mine['images']}")
    print(f"largest difference {worst:.1%} (goal within {GOAL:.0%}): {'MET' if worst <= GOAL else 'NOT MET'}")


if __name__ == "__main__":
    main()
