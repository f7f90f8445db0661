"""A tiny in-thread aiohttp server speaking SGLang's streaming protocol, for client-side tests.

The simulator (``sim_factory``) is the end-to-end target; this fake lets tests control exactly
what arrives and observe exactly what the load generator sent (bodies, headers, concurrency).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web


@dataclass
class FakeBehaviour:
    step_s: float = 0.002
    tokens_per_chunk: int = 1
    #: Answer this status with an error body instead of streaming.
    status: int = 200
    require_key: str | None = None
    #: Stop after this many tokens without [DONE] (connection closed).
    drop_after: int | None = None
    #: Tokens to produce = requested + this (to exercise token-count checks).
    extra_tokens: int = 0
    metrics: bool = True
    #: Send SGLang's cumulative ``output_ids`` in every chunk.
    ids: bool = False
    #: After this many tokens, stop sending and hold the stream open (a stalled server).
    stall_after: int | None = None
    #: Claim this many ``completion_tokens`` in every chunk, whatever was sent.
    claim: int | None = None
    #: Send this many tokens fewer than asked for, while claiming (and finishing as if) all were sent.
    lie_short: int = 0
    #: Raw bytes written after ``data: [DONE]``.
    after_done: bytes = b""
    #: The error message of a non-200 answer; with ``endless_error`` the body never ends.
    error_message: str = "The request queue is full."
    endless_error: bool = False
    #: Write one ``data:`` line of this many bytes with no newline, then hold the stream open.
    long_line: int | None = None
    #: Prompt tokens per image of a request with ``image_data`` (its text counts a token a word).
    image_tokens: int = 0
    #: Report ``image_tokens`` in meta_info as SGLang 0.5.23 does.
    report_image_tokens: bool = False


@dataclass
class FakeServer:
    url: str
    behaviour: FakeBehaviour
    bodies: list[dict[str, Any]] = field(default_factory=list)
    #: Vocabulary reads before a load (not in ``bodies``).
    vocab_reads: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    flushes: int = 0
    #: Stop accepting connections (as a server that died); requests then meet "connection refused".
    stop_listening: Callable[[], None] = lambda: None


async def _hold(request: web.Request) -> None:
    """Keep the stream open without sending, until the client hangs up (aiohttp does not cancel
    handlers on disconnect)."""
    while request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(0.02)


def _chunk(b: FakeBehaviour, body: dict[str, Any], n: int, want: int) -> dict[str, Any]:
    fr = {"type": "length", "length": n} if n == want else None
    prompt = len(body.get("input_ids", []))
    if body.get("image_data"):
        prompt = len(str(body.get("text", "")).split()) + b.image_tokens * len(body["image_data"])
    meta = {"completion_tokens": n + b.lie_short if b.claim is None else b.claim, "finish_reason": fr,
            "prompt_tokens": prompt}
    if b.report_image_tokens:
        meta["image_tokens"] = b.image_tokens * len(body.get("image_data", []))
    chunk: dict[str, Any] = {"text": "x" * n}
    if b.ids:
        chunk["output_ids"] = [100 + i for i in range(n)]
    chunk["meta_info"] = meta
    return chunk


async def _error(request: web.Request, b: FakeBehaviour) -> web.StreamResponse:
    if not b.endless_error:
        return web.json_response({"error": {"message": b.error_message}}, status=b.status)
    resp = web.StreamResponse(status=b.status, headers={"Content-Type": "text/plain"})
    await resp.prepare(request)
    while True:  # until the client hangs up
        await resp.write(b"overloaded " * 1000)
        await asyncio.sleep(0)


def _app(state: FakeServer) -> web.Application:
    b = state.behaviour

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="")

    async def metrics(_: web.Request) -> web.Response:
        if not b.metrics:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.Response(
            text=(
                f'sglang:num_running_reqs{{tp_rank="0"}} {state.in_flight}.0\n'
                'sglang:num_queue_reqs{tp_rank="0"} 0.0\nsglang:token_usage{tp_rank="0"} 0.25\n'
            )
        )

    async def flush(_: web.Request) -> web.Response:
        state.flushes += 1
        return web.Response(text="Cache flushed.\n")

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if "token_ids_logprob" in body:  # the load's vocabulary read (loadgen/client/vocab.py), answered as 0.5.23 does
            state.vocab_reads += 1
            bad = body["token_ids_logprob"][0]
            return web.json_response({"error": {"message": f"token_ids_logprob contains out-of-vocabulary token id "
                                                           f"{bad}; valid range is [0, 32000)."}}, status=400)
        state.bodies.append(body)
        state.headers.append(dict(request.headers))
        if b.require_key and request.headers.get("Authorization") != f"Bearer {b.require_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        if b.status != 200:
            return await _error(request, b)
        want = body["sampling_params"]["max_new_tokens"] + b.extra_tokens - b.lie_short
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            if b.long_line is not None:
                await resp.write(b"data: " + b"x" * b.long_line)
                await _hold(request)
                return resp
            n = 0
            while n < want:
                await asyncio.sleep(b.step_s)
                if b.stall_after is not None and n >= b.stall_after:
                    await _hold(request)
                    return resp
                n = min(want, n + b.tokens_per_chunk)
                if b.drop_after is not None and n > b.drop_after:
                    assert request.transport is not None
                    request.transport.close()
                    return resp
                await resp.write(b"data: " + json.dumps(_chunk(b, body, n, want)).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n" + b.after_done)
        except ConnectionResetError:  # the client hung up (cancelled, timed out): nothing to answer
            pass
        finally:
            state.in_flight -= 1
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/flush_cache", flush)
    app.router.add_post("/generate", generate)
    return app


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}
    state = FakeServer(url="", behaviour=FakeBehaviour())

    async def start() -> None:
        runner = web.AppRunner(_app(state), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        state.url = f"http://127.0.0.1:{port}"
        holder["runner"] = runner
        holder["site"] = site
        ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    async def die() -> None:
        await holder["site"].stop()
        server = holder["runner"].server
        assert server is not None
        for handler in server.connections:  # as the kernel resets a dead process's connections
            if handler.transport is not None:
                handler.transport.abort()

    def stop_listening() -> None:
        asyncio.run_coroutine_threadsafe(die(), loop).result(10)

    state.stop_listening = stop_listening
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield state
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
