"""Record the request bodies ``sglang.bench_serving --dataset-name image`` sends, as JSON shapes.

Runs bench_serving (this interpreter's SGLang) against a stub server on 127.0.0.1 that records each
generation request and answers with a two-token stream, for the backends ``sglang`` (native
``/generate``) and ``sglang-oai-chat``, with fixed image options. Writes, per backend, the body's shape
(keys and value types; lists by their first item) and facts about its images, with provenance.
tests/loadgen/prompts/test_image_dataset.py compares the load generator's bodies with the recorded shapes.

Usage: python record_image_bodies.py MODEL_DIR OUT.json   (the real-SGLang venv's python; MODEL_DIR holds
a processor, e.g. the tiny LLaVA that make_tiny_vlm.py writes)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from aiohttp import web

OPTIONS = ["--dataset-name", "image", "--num-prompts", "1", "--image-count", "2", "--image-resolution", "360p",
           "--image-format", "png", "--image-content", "blank", "--random-input-len", "8",
           "--random-output-len", "2", "--max-concurrency", "1", "--seed", "1"]


def shape_of(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: shape_of(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape_of(value[0])] if value else []
    return type(value).__name__


def _stub(bodies: list[dict[str, Any]]) -> web.Application:
    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        bodies.append(body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chat = request.path.startswith("/v1/")
        for n in (1, 2):
            if chat:
                chunk = {"id": "x", "object": "chat.completion.chunk", "model": "m",
                         "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}
            else:
                chunk = {"text": "a" * n, "meta_info": {"completion_tokens": n, "prompt_tokens": 1,
                                                       "finish_reason": {"type": "length"} if n == 2 else None}}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def ok(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}], "version": "0.5.23"})

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_post("/generate", generate)
    app.router.add_post("/v1/chat/completions", generate)
    app.router.add_post("/flush_cache", ok)
    app.router.add_get("/v1/models", ok)
    app.router.add_get("/server_info", ok)
    app.router.add_get("/health", ok)
    return app


def main(model: str, out: Path) -> None:
    bodies: list[dict[str, Any]] = []
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(_stub(bodies), access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    threading.Thread(target=loop.run_forever, daemon=True).start()
    recorded: dict[str, Any] = {}
    for backend in ("sglang", "sglang-oai-chat"):
        bodies.clear()
        cmd = [sys.executable, "-m", "sglang.bench_serving", "--backend", backend, "--base-url",
               f"http://127.0.0.1:{port}", "--model", model, "--tokenizer", model, *OPTIONS]
        with tempfile.TemporaryDirectory() as tmp:  # bench_serving writes its result file in its cwd
            subprocess.run(cmd, check=True, timeout=600, stdout=subprocess.DEVNULL, cwd=tmp)
        body = bodies[-1]  # the last: bench_serving's warmup request is the same shape
        urls = body.get("image_data") or [p["image_url"]["url"] for p in body["messages"][0]["content"]
                                          if p.get("type") == "image_url"]
        recorded[backend] = {"shape": shape_of(body), "images": len(urls),
                             "url_prefix": urls[0].split(",", 1)[0] + ","}
        if "messages" in body:  # the order of the content parts: images, then the text
            recorded[backend]["content_types"] = [p["type"] for p in body["messages"][0]["content"]]
        else:  # the processor's chat template: where the image placeholders stand in the text
            recorded[backend]["text_head"] = body["text"][:120]
    import sglang

    recorded["provenance"] = {
        "sglang": sglang.__version__,
        "command": "python -m sglang.bench_serving --backend BACKEND " + " ".join(OPTIONS),
        "recorded_by": "scripts/real-sglang/record_image_bodies.py",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
