"""Multi-turn chat sessions (``dataset="multiturn:..."``): each session is one conversation.

A session's turns are sequential: turn ``t`` sends the whole history through ``/v1/chat/completions``
(system message, first user message, then each earlier answer **as the server wrote it** and a new
user message), waits for the answer, thinks ``think_s`` seconds, and goes on. Sessions run at once up
to ``concurrency``. The growing history is a growing shared prefix, which SGLang's radix cache serves
from cache (``cached_tokens``); a cache-aware router (sgl-router, SMG) keys chat requests on the first
message only, so every turn of a session lands on the worker that holds its history. A session whose
turn fails stops there (its next turn would need the answer): its remaining turns are not sent.

Request ``s * turns + t`` is turn ``t`` of session ``s``; at most ``requests`` requests are sent (the
last sessions are cut short when ``sessions * turns`` is larger).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Coroutine
from typing import Any

import httpx

from pytest_sglang.loadgen.client.http import send_request
from pytest_sglang.loadgen.client.servermetrics import MetricsSampler
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.datasets import Prompt, estimate_len
from pytest_sglang.loadgen.run.runner import Driver, Progress, Shard, ShardResult, expiry, start_sampler
from pytest_sglang.loadgen.shape.spec import LoadSpec
from pytest_sglang.loadgen.workloads.forms import MultiTurnShape, multiturn_shape

#: Distinct words of generated messages (one short word per wanted token, as random-ids chat prompts).
_WORDS = 97


def words(rng: random.Random, count: int) -> str:
    """``count`` short words: about one token each with most tokenizers (the server reports the true count)."""
    return " ".join(f"w{rng.randrange(_WORDS)}" for _ in range(count))


def opening(spec: LoadSpec, shape: MultiTurnShape, session: int) -> list[dict[str, Any]]:
    """The messages a session starts with: the shared system message (if any), its own first question."""
    messages: list[dict[str, Any]] = []
    if shape.system_len:
        messages.append({"role": "system", "content": words(random.Random(f"{spec.seed}:system"), shape.system_len)})
    first = shape.first_len if shape.first_len is not None else spec.input_len
    messages.append({"role": "user", "content": f"Session {session}: " +
                     words(random.Random(f"{spec.seed}:first:{session}"), first)})
    return messages


class _Sessions:
    def __init__(self, client: httpx.AsyncClient, spec: LoadSpec, clock_base: float) -> None:
        self.client, self.spec, self.clock_base = client, spec, clock_base
        self.shape = multiturn_shape(spec.dataset)
        self.total = min(spec.requests, self.shape.session_count(spec.requests) * self.shape.turns)
        self.driver: Driver | None = None
        self.sent = 0

    async def session(self, s: int) -> RequestRecord | None:
        assert self.driver is not None
        driver, shape, spec = self.driver, self.shape, self.spec
        task = asyncio.current_task()
        assert task is not None
        messages = opening(spec, shape, s)
        rng = random.Random(f"{spec.seed}:session:{s}")
        for t in range(shape.turns):
            index = s * shape.turns + t
            if index >= self.total:
                break
            if t:
                messages.append({"role": "user", "content": words(rng, shape.turn_len)})
            out = rng.randint(max(int(spec.output_len * spec.range_ratio), 1), spec.output_len)
            answer: list[str] = []
            driver.tasks[task] = index  # a cancel now times this turn out
            self.sent += 1
            record = await send_request(self.client, spec, Prompt(list(messages), estimate_len(messages), out), index,
                                        clock_base=self.clock_base, answer=answer)
            driver.tasks[task] = None  # between turns: a cancel times nothing out
            driver.record(record)
            if not record.success:
                break
            messages.append({"role": "assistant", "content": "".join(answer)})
            if shape.think_s and t + 1 < shape.turns:
                await asyncio.sleep(shape.think_s)
        return None


async def run_sessions(
    client: httpx.AsyncClient,
    spec: LoadSpec,
    shard: Shard,
    *,
    clock_base: float,
    deadline: float,
    progress: Progress | None = None,
    sample: bool = False,
    sampler: MetricsSampler | None = None,
) -> ShardResult:
    """Run the multi-turn sessions of ``spec.dataset``; times are relative to ``clock_base``."""
    runs = _Sessions(client, spec, clock_base)
    collector = Collector(spec.max_records, seed=shard.seed)
    sampler = await start_sampler(client, sample, sampler)
    driver = runs.driver = Driver(collector.add, deadline, progress, runs.total)
    sessions = -(-runs.total // runs.shape.turns)

    def make(s: int) -> Coroutine[Any, Any, RequestRecord | None]:
        return runs.session(s)

    try:
        await driver.run(range(sessions), make, cap=spec.concurrency, expiry=expiry(spec, "multi-turn sessions"))
    finally:
        view = await sampler.stop() if sampler else {}
    not_sent = runs.total - runs.sent
    stopped = ""
    if driver.expired:
        stopped = (f"the load's deadline load_timeout_s={spec.load_timeout():g} s passed: "
                   f"{runs.sent} turns sent, {not_sent} not sent")
    elif not_sent:
        stopped = f"{not_sent} turns not sent: a session stops at its first failed turn"
    return ShardResult(collector=collector, end=time.perf_counter() - clock_base, server_view=view,
                       not_sent=not_sent, stopped=stopped,
                       workload={"sessions": sessions, "turns": runs.shape.turns, "think_s": runs.shape.think_s})
