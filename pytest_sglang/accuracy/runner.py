"""Run an accuracy task against a server: every example at once up to ``concurrency`` in flight.

Requests go through the load generator's async client (httpx on aiohttp); every answer is read with
a size cap and within the harness's per-request timeout. A request that fails (HTTP error, timeout,
no text) scores as wrong, as in SGLang's harnesses, and is counted separately so a flaky server is
not mistaken for a weak model.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from pytest_sglang.accuracy.harness import Harness, answer_text
from pytest_sglang.accuracy.task import Example, Task
from pytest_sglang.accuracy.verdict import AccuracyResult
from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.loadgen.client import describe_exc, make_client
from pytest_sglang.server.client import as_server_url, auth_header
from pytest_sglang.server.url import ServerURL

#: Bytes of one answer read at most (512 tokens of text are a few kB).
MAX_ANSWER_BYTES = 1024 * 1024
#: Characters of a model output kept per example (enough to see why an answer was wrong).
KEEP_CHARS = 600
#: ``progress(done, total, correct)``, called as examples finish.
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class Outcome:
    index: int
    correct: bool
    target: str
    extracted: str | None
    output: str
    error: str | None = None


async def _read_json(resp: httpx.Response) -> object:
    data = b""
    async for chunk in resp.aiter_bytes():
        data += chunk
        if len(data) > MAX_ANSWER_BYTES:
            raise ValueError(f"the answer exceeds {MAX_ANSWER_BYTES // 1024} KiB")
    return json.loads(data)


async def _ask(client: httpx.AsyncClient, harness: Harness, task: Task, example: Example, index: int,
               model: str) -> Outcome:
    path, body = harness.request(task, example, model)
    route = harness.resolved(task).route or "completions"

    async def post() -> tuple[int, object]:
        async with client.stream("POST", path, json=body) as resp:
            return resp.status_code, await _read_json(resp)

    error: str | None = None
    text: str | None = None
    try:
        status, payload = await asyncio.wait_for(post(), harness.request_timeout_s)
        text = answer_text(route, payload) if status == 200 else None
        if status != 200:
            error = f"HTTP {status}: {str(payload)[:200]}"
        elif text is None:
            error = f"no text in the answer: {str(payload)[:200]}"
    except asyncio.TimeoutError:
        error = f"no answer within request_timeout_s={harness.request_timeout_s:g}"
    except (httpx.HTTPError, OSError, ValueError) as exc:
        error = describe_exc(exc)
    extracted = task.extract(text) if text is not None else None
    return Outcome(index, task.is_correct(extracted, example), example.target, extracted,
                   (text or "")[:KEEP_CHARS], error)


async def _model(client: httpx.AsyncClient, url: str) -> str:
    """The served model name for OpenAI requests (from ``/v1/models``)."""
    try:
        resp = await asyncio.wait_for(client.get("/v1/models"), 30)
        data = resp.json().get("data") if resp.status_code == 200 else None
    except (httpx.HTTPError, OSError, ValueError, asyncio.TimeoutError) as exc:
        raise ServerUnavailable(f"{url}: GET /v1/models failed ({describe_exc(exc)}).\nFix: check the URL and "
                                "that the server is up (its /health).") from None
    if isinstance(data, list) and data and isinstance(data[0], dict) and isinstance(data[0].get("id"), str):
        return str(data[0]["id"])
    raise ServerUnavailable(f"{url}: GET /v1/models lists no model.\nFix: point the URL at an SGLang server.")


async def _run(url: ServerURL, harness: Harness, task: Task, api_key: str | None,
               progress: Progress | None) -> list[Outcome]:
    limit = asyncio.Semaphore(harness.concurrency)
    done: list[Outcome] = []
    async with make_client(url.base, api_key=None, connections=harness.concurrency) as client:
        client.headers.update(auth_header(api_key, url))  # Bearer key, else the URL's user:password
        model = await _model(client, url.display)

        async def one(i: int, example: Example) -> Outcome:
            async with limit:
                outcome = await _ask(client, harness, task, example, i, model)
            done.append(outcome)
            if progress is not None:
                progress(len(done), len(task.examples), sum(o.correct for o in done))
            return outcome

        return list(await asyncio.gather(*(one(i, e) for i, e in enumerate(task.examples))))


def evaluate(url: str | ServerURL, harness: Harness, *, api_key: str | None = None,
             progress: Progress | None = None) -> AccuracyResult:
    """Run ``harness`` against the server at ``url``; the result carries the score and its interval.

    Runs its own event loop (``asyncio.run``): call it from synchronous code.
    """
    task = harness.load()
    start = time.perf_counter()
    outcomes = asyncio.run(_run(as_server_url(url), harness, task, api_key, progress))
    return AccuracyResult.from_outcomes(task.name, outcomes, harness.fingerprint(task),
                                        time.perf_counter() - start, harness.confidence)
