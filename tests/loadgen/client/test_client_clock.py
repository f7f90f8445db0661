"""The request clock starts where bench_serving's does: before the body is encoded (an image body is large)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from pytest_sglang.loadgen import LoadSpec
from pytest_sglang.loadgen.client import http as client
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts import bodies
from pytest_sglang.loadgen.prompts.datasets import Prompt

ENCODE_S = 0.3


def _answer(request: httpx.Request) -> httpx.Response:
    events = [{"choices": [{"index": 0, "delta": {"content": " hi"}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1}}]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


def test_the_time_to_encode_the_body_is_in_the_ttft(monkeypatch: pytest.MonkeyPatch) -> None:
    slow_body = bodies.request_body

    def encoded_slowly(*args: Any, **kwargs: Any) -> dict[str, Any]:
        time.sleep(ENCODE_S)  # a megabyte of base64 on a busy runner
        return slow_body(*args, **kwargs)

    monkeypatch.setattr(client, "request_body", encoded_slowly)
    spec = LoadSpec(requests=1, input_len=4, output_len=1, api="chat")

    async def one() -> RequestRecord:
        async with httpx.AsyncClient(base_url="http://sglang.test", transport=httpx.MockTransport(_answer)) as c:
            return await client.send_request(c, spec, Prompt("hello there", 2, 1), 0, clock_base=0.0)

    rec = asyncio.run(one())
    assert rec.error_kind is None, rec.error
    assert rec.ttft is not None and rec.ttft >= ENCODE_S
