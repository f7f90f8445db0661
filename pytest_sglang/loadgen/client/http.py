"""HTTP side of the load: the httpx API on the aiohttp transport, one streaming request at a time.

The default httpx transport decodes chunked HTTP in pure Python (about 5x slower here, see
docs/loadgen.md); ``httpx_aiohttp.AiohttpTransport`` keeps httpx's API on aiohttp's C parser.
Everything read from the server is bounded: an error body by :data:`MAX_ERROR_BODY`, a stream line
by :func:`max_line_bytes`, a whole request by its timeout.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from pytest_sglang.defaults import CLIENT_KEEPALIVE_S
from pytest_sglang.loadgen.client.clock import stream_clock
from pytest_sglang.loadgen.client.streams import StreamReader, make_reader
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.bodies import PATHS, request_body
from pytest_sglang.loadgen.prompts.datasets import Prompt
from pytest_sglang.loadgen.shape.spec import LoadSpec

_DATA = b"data:"
#: Bytes of a non-200 body read for its error message (the rest is not read at all).
MAX_ERROR_BODY = 64 * 1024


def make_client(url: str, *, api_key: str | None, connections: int | None) -> httpx.AsyncClient:
    """An AsyncClient on aiohttp with room for ``connections`` streams (None = unlimited).

    aiohttp's connector caps connections at 100 by default, which would silently queue a higher
    concurrency inside the client and inflate TTFT. Two spare connections keep the /metrics
    sampler from waiting behind the streams.
    """
    limit = connections + 2 if connections else 0
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, keepalive_timeout=CLIENT_KEEPALIVE_S),
        timeout=aiohttp.ClientTimeout(total=None),
    )
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.AsyncClient(
        transport=AiohttpTransport(client=session),
        base_url=url,
        headers=headers,
        timeout=httpx.Timeout(None, connect=30.0),
    )


def max_line_bytes(output_len: int) -> int:
    """Return the longest ``data:`` line a stream of ``output_len`` tokens can need.

    SGLang's cumulative chunks repeat all text and ids so far (a token is a few bytes of each, escaping
    included).
    """
    return 1024 * 1024 + 128 * output_len


async def send_request(
    client: httpx.AsyncClient,
    spec: LoadSpec,
    prompt: Prompt,
    index: int,
    *,
    clock_base: float,
    output_len: int | None = None,
    answer: list[str] | None = None,
    cancel_after: int | None = None,
) -> RequestRecord:
    """Send one streaming request and measure it; never raises for a per-request failure.

    ``answer``: a list that receives the answer's text (chat API), for a conversation's next turn.
    ``cancel_after``: close the connection once this many chunks of text arrived (a cancelled request,
    :mod:`.cancel`); an answer that ends first is a normal one.
    """
    expected = prompt.output_len if output_len is None else output_len
    rec = RequestRecord(index=index, prompt_len=prompt.prompt_len, sent_prompt_len=prompt.prompt_len,
                        expected_output_len=expected, images=len(prompt.images))
    perf = time.perf_counter
    # The clock starts before the body is encoded, as bench_serving's (its aiohttp encodes json= inside the
    # timed post): an image request's megabyte of base64 is part of its TTFT on both sides.
    start = perf()
    rec.start_time = time.time()  # the same moment on the wall clock, to match server timestamps
    body = json.dumps(request_body(spec, prompt, expected)).encode()
    limit = spec.request_timeout(expected, prompt.prompt_len if spec.is_trace() else None)  # a trace row's own length
    del prompt  # in flight, only the encoded body is held (a token id list costs ~7x its JSON)
    rec.start = start - clock_base
    reader = make_reader(spec.api, rec, start, spec.ignore_eos, answer)
    state = {"headers": False}
    try:
        await _within(limit, _stream(client, spec, body, reader, state, cancel_after))
    except asyncio.TimeoutError:
        rec.fail(
            "timeout",
            f"no complete answer within request_timeout_s={limit:g} s ({rec.chunks} chunks received)",
        )
    except (httpx.HTTPError, aiohttp.ClientError, OSError) as exc:
        rec.fail(_kind(exc, state["headers"]), describe_exc(exc))
    if rec.error_kind is not None and rec.error_kind.startswith("http_"):
        return rec
    if rec.cancelled:  # gone on purpose: an unfinished stream is what was meant, not a truncation
        rec.e2e = reader.last_line_t - start
        return rec
    return reader.finish()


def _kind(exc: BaseException, headers_seen: bool) -> str:
    if is_refused(exc):
        return "refused"
    if is_timeout(exc):
        return "timeout"
    return "truncated" if headers_seen else "connection"


async def _stream(
    client: httpx.AsyncClient, spec: LoadSpec, body: bytes, reader: StreamReader, state: dict[str, bool],
    cancel_after: int | None = None,
) -> None:
    rec = reader.record
    clock = stream_clock()
    mark, t = clock.count, 0.0
    longest = max_line_bytes(rec.expected_output_len)
    async with client.stream(
        "POST", PATHS[spec.api], content=body, headers={"Content-Type": "application/json"}
    ) as resp:
        state["headers"] = True
        if resp.status_code != 200:
            text = (await _read_some(resp, MAX_ERROR_BODY))[:2000].decode("utf-8", "replace")
            rec.e2e = time.perf_counter() - reader.start
            rec.fail(f"http_{resp.status_code}", _error_message(text))
            return
        buf = b""
        async for chunk in resp.aiter_bytes():
            t = clock.stamp(mark, t)  # when the loop saw it arrive; all lines of one read share it
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(_DATA):
                    reader.feed(t, line[5:].strip())
            if len(buf) > longest:
                reader.violate(f"a stream line longer than {longest:,} bytes for {rec.expected_output_len} tokens")
            if reader.stop:
                return  # leaving the block closes the connection: nothing more is read
            if cancel_after is not None and reader.tokens_arrived() >= cancel_after and not reader.done \
                    and rec.error_kind is None:
                rec.cancelled = True  # the client goes away: leaving the block closes the connection
                return
            mark = clock.count


async def _read_some(resp: httpx.Response, limit: int) -> bytes:
    data = b""
    async for chunk in resp.aiter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return data[:limit]


async def _within(timeout_s: float, coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` with a deadline.

    ``asyncio.wait_for`` before Python 3.12 wraps it in a new task, which delays writing each request by
    one loop iteration; ``asyncio.timeout`` does not.
    """
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout_s):
            await coro
    else:  # pragma: no cover - Python 3.10
        await asyncio.wait_for(coro, timeout_s)


def _error_message(text: str) -> str:
    try:
        data: object = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(data, dict) and "error" in data:
        err = data["error"]
        return str(err.get("message", err)) if isinstance(err, dict) else str(err)
    if isinstance(data, dict) and "message" in data:  # SGLang's ErrorResponse (object: "error")
        return str(data["message"])
    if isinstance(data, dict) and "detail" in data:
        return str(data["detail"])
    return text.strip()


def _root(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def is_refused(exc: BaseException) -> bool:
    """Classify ``exc`` by its innermost cause.

    httpx_aiohttp maps aiohttp errors onto httpx types loosely (a refused connection surfaces as
    ``httpx.ConnectTimeout``), so the innermost cause decides.
    """
    root = _root(exc)
    if isinstance(root, aiohttp.ClientConnectorError):
        return isinstance(root.os_error, ConnectionRefusedError)
    return isinstance(root, ConnectionRefusedError)


def is_timeout(exc: BaseException) -> bool:
    root = _root(exc)
    # aiohttp's read timeouts subclass asyncio.TimeoutError (not the builtin one before Python 3.11).
    return isinstance(root, (TimeoutError, asyncio.TimeoutError))


def describe_exc(exc: BaseException) -> str:
    """The root cause of a transport error in a few words."""
    root = _root(exc)
    if is_refused(exc):
        return f"connection refused ({root})"
    text = str(root)
    return f"{type(root).__name__}: {text}" if text else type(root).__name__
