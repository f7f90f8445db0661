"""Run an accuracy task against a server: :func:`evaluate`, the engine entry of the gate and ``eval``.

``runner="builtin"`` (this module): every example at once up to ``concurrency`` in flight.
``runner="sgl-eval"``: SGLang's official client asks instead (:mod:`~pytest_sglang.accuracy.sgl_eval`).

Requests go through the load generator's async client (httpx on aiohttp); every answer is read with
a size cap and within the harness's per-request timeout. A request that fails (HTTP error, timeout,
no text) scores as wrong, as in SGLang's harnesses, and is counted separately so a flaky server is
not mistaken for a weak model.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from pytest_sglang.accuracy import sgl_eval as sgl_eval_runner
from pytest_sglang.accuracy.harness import Harness, answer_text
from pytest_sglang.accuracy.sgl_eval import RUNNERS, Runner
from pytest_sglang.accuracy.task import Example, Task
from pytest_sglang.accuracy.verdict import AccuracyResult, EvalRunError, Outcome, Tally
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.loadgen.client.http import describe_exc, make_client
from pytest_sglang.server.client import as_server_url, auth_header
from pytest_sglang.server.url import ServerURL

#: Bytes of one answer read at most (512 tokens of text are a few kB).
MAX_ANSWER_BYTES = 1024 * 1024
#: Characters of a model output kept per example (enough to see why an answer was wrong).
KEEP_CHARS = 600
#: ``progress(done, total, correct)``, called as examples finish.
Progress = Callable[[int, int, int], None]


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


async def _model(client: httpx.AsyncClient, url: str, api_key: str | None) -> str:
    """The served model name for OpenAI requests (from ``/v1/models``)."""
    try:
        resp = await asyncio.wait_for(client.get("/v1/models"), 30)
        data = resp.json().get("data") if resp.status_code == 200 else None
    except (httpx.HTTPError, OSError, ValueError, asyncio.TimeoutError) as exc:
        raise ServerUnavailable(f"{url}: GET /v1/models failed ({describe_exc(exc)}).\nFix: check the URL and "
                                "that the server is up (its /health).") from None
    if resp.status_code in (401, 403):  # not "lists no model": the server wants a key (SGLang's --api-key)
        refused = "refused the API key sent" if api_key else "needs an API key and none was sent"
        raise ServerUnavailable(f"{url}: GET /v1/models answered {resp.status_code}: the server {refused}.\n"
                                "Fix: pass the server's key (api_key; eval --api-key or env SGLANG_API_KEY).")
    if resp.status_code != 200:
        raise ServerUnavailable(f"{url}: GET /v1/models answered HTTP {resp.status_code}.\nFix: point the URL at "
                                "an SGLang server (or a gateway that serves /v1/models).")
    if isinstance(data, list) and data and isinstance(data[0], dict) and isinstance(data[0].get("id"), str):
        return str(data[0]["id"])
    raise ServerUnavailable(f"{url}: GET /v1/models lists no model.\nFix: point the URL at an SGLang server.")


async def _run(url: ServerURL, harness: Harness, task: Task, api_key: str | None,
               progress: Progress | None, timeout_s: float | None) -> Tally:
    """``concurrency`` workers take the examples in turn: tasks, outcomes and examples in flight only.

    (Once every example was a task of one ``gather``: 100,000 examples were 100,000 tasks and
    outcomes, and a first Ctrl-C had to cancel them all.)
    """
    tally = Tally()
    examples = enumerate(task.examples)  # shared: each worker takes the next example
    total = len(task.examples)
    async with make_client(url.base, api_key=None, connections=harness.concurrency) as client:
        client.headers.update(auth_header(api_key, url))  # Bearer key, else the URL's user:password
        model = await _model(client, url.display, api_key)

        async def worker() -> None:
            for i, example in examples:
                tally.add(await _ask(client, harness, task, example, i, model))
                if progress is not None:
                    progress(tally.total, total, tally.correct)

        workers = min(harness.concurrency, max(total, 1))
        try:
            await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(workers))), timeout_s)
        except asyncio.TimeoutError:
            partial = tally.result(task.name, harness.fingerprint(task), timeout_s or 0.0, harness.confidence)
            raise EvalRunError(f"{url.display}: the run did not finish within timeout_s={timeout_s:g}: "
                               f"{tally.total}/{total} examples answered ({partial.correct} correct)",
                               fix="raise timeout_s (eval --timeout), lower num_examples, or raise concurrency",
                               partial=partial) from None
    return tally


def evaluate(url: str | ServerURL, harness: Harness, *, api_key: str | None = None,
             progress: Progress | None = None, runner: Runner = "builtin", sgl_eval: str | Path | None = None,
             sgl_eval_args: Sequence[str] = (), timeout_s: float | None = None,
             work_dir: Path | None = None) -> AccuracyResult:
    """Run ``harness`` against the server at ``url``; the result carries the score and its interval.

    Args:
        url: the server (or gateway) base URL.
        harness: the task and how to ask it.
        api_key: sent as ``Authorization: Bearer``.
        progress: ``progress(done, total, correct)`` as examples finish.
        runner: ``"builtin"`` (this package's harness, SGLang's prompt formats) or ``"sgl-eval"``
            (SGLang's official client as a subprocess; see :mod:`~pytest_sglang.accuracy.sgl_eval`).
            Either way the verdict is :func:`~pytest_sglang.accuracy.verdict.judge`'s.
        sgl_eval: the sgl-eval executable (default: ``sgl-eval`` on PATH or beside this Python).
        sgl_eval_args: more ``sgl-eval run`` flags (``--prompt``, ``--seed``, ``--chat-template-kwarg``).
        timeout_s: one deadline for the whole run. None: the built-in runner is bounded by its
            per-request timeout; sgl-eval gets ``request_timeout_s`` per round of ``concurrency``
            examples plus 120 s.
        work_dir: sgl-eval's folder (dataset, log, its run folder), kept; None: a temporary one,
            removed after a successful run and kept (named in the error) after a failed one.

    Raises:
        ConfigError: a bad keyword, a missing sgl-eval, or data that cannot be loaded.
        ServerUnavailable: nothing serves a model at ``url``.
        EvalRunError: the run gave no verdict (deadline, sgl-eval failure).

    Runs its own event loop (``asyncio.run``): call it from synchronous code.
    """
    _check(runner, sgl_eval, sgl_eval_args, timeout_s)
    target = as_server_url(url)
    if runner == "sgl-eval":
        return sgl_eval_runner.run(target, harness, api_key=api_key, progress=progress, executable=sgl_eval,
                                   args=sgl_eval_args, timeout_s=timeout_s, work_dir=work_dir)
    task = harness.load()
    start = time.perf_counter()
    tally = asyncio.run(_run(target, harness, task, api_key, progress, timeout_s))
    return tally.result(task.name, harness.fingerprint(task), time.perf_counter() - start, harness.confidence)


def _check(runner: object, sgl_eval: object, sgl_eval_args: Sequence[str], timeout_s: object) -> None:
    if runner not in RUNNERS:
        raise ConfigError("runner", runner, f"is not one of {', '.join(RUNNERS)}",
                          "pass runner='builtin' (default) or runner='sgl-eval'")
    if runner != "sgl-eval" and (sgl_eval is not None or sgl_eval_args):
        raise ConfigError("sgl_eval" if sgl_eval is not None else "sgl_eval_args",
                          sgl_eval if sgl_eval is not None else list(sgl_eval_args),
                          f"applies to runner='sgl-eval' only, not runner={runner!r}",
                          "pass runner='sgl-eval' too, or drop it")
    if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                  or not math.isfinite(timeout_s) or timeout_s <= 0):
        raise ConfigError("timeout_s", timeout_s, "must be a number of seconds > 0",
                          "pass e.g. 600, or None for the default")
